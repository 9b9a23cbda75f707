"""Text analysis both flows share: wordpiece chunking and the one BM25."""
