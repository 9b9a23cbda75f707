"""Ways in that other tools already speak: MCP (:mod:`.mcp_server`), a server of its own
beside the Flask app. It authenticates with the product's own API tokens and runs every
read in that caller's scope; it decides nothing the library does not (it only translates).
The OpenAI chat protocol is a blueprint of the web app (:mod:`oracle_rag.web.openai_api`),
since it shares the app's request state.
"""
