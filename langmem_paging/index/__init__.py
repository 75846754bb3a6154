"""Search indexes over a thread's paged messages: the `SearchIndex` interface and the in-memory BM25
index (`base`), FTS5 in a SQLite store's file (`sqlite`), and Postgres full-text search (`postgres`).
"""
