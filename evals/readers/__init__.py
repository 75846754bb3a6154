"""Readers: who decides which pages to recall (lexical, offline; llm, a real model)."""
