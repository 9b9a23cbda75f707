"""The read path's retrieval: semantic, keyword and hybrid search under the caller's scope."""
