"""Ways in that other tools already speak: MCP (:mod:`.mcp_server`) and the
OpenAI chat protocol (:mod:`.openai_api`). Each one authenticates with the
product's own API tokens and runs every read in that caller's scope; none of
them decides anything the library does not (they only translate).
"""
