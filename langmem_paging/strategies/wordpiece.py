"""BERT's uncased word-piece tokenizer in pure Python, for `DefaultEmbedder` (no tokenizers wheel).

The rules of BERT's ``BasicTokenizer`` and ``WordpieceTokenizer`` (what Hugging Face's
``BertNormalizer`` + ``BertPreTokenizer`` + ``WordPiece`` compute for all-MiniLM-L6-v2): control
characters dropped, whitespace unified, CJK ideographs split off, lower-cased, accents stripped
(NFD, combining marks dropped), punctuation split off, then each word cut greedily into the longest
pieces in the vocabulary (``##`` marks a piece inside a word; a word that cannot be cut, or of more
than 100 characters, is ``[UNK]``). `tests/strategies/test_default_embedder.py` checks it against the
``tokenizers`` wheel where that is installed.

Example:
    >>> vocab = {"[UNK]": 0, "green": 1, "##house": 2, "cafe": 3, ",": 4}
    >>> WordPiece(vocab).encode("Greenhouse, Café!")
    [1, 2, 4, 3, 0]
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

__all__ = ["WordPiece"]

_MAX_WORD_CHARS = 100


def _is_whitespace(char: str) -> bool:
    return char in " \t\n\r" or unicodedata.category(char) == "Zs"


def _is_control(char: str) -> bool:
    return char not in "\t\n\r" and unicodedata.category(char).startswith("C")


def _is_punctuation(char: str) -> bool:
    code = ord(char)
    # BERT treats every non-alphanumeric ASCII symbol as punctuation ("$", "^", "`"), not only Unicode's P*
    if 33 <= code <= 47 or 58 <= code <= 64 or 91 <= code <= 96 or 123 <= code <= 126:
        return True
    return unicodedata.category(char).startswith("P")


def _is_cjk(code: int) -> bool:
    return (
        0x4E00 <= code <= 0x9FFF
        or 0x3400 <= code <= 0x4DBF
        or 0x20000 <= code <= 0x2A6DF
        or 0x2A700 <= code <= 0x2B73F
        or 0x2B740 <= code <= 0x2B81F
        or 0x2B820 <= code <= 0x2CEAF
        or 0xF900 <= code <= 0xFAFF
        or 0x2F800 <= code <= 0x2FA1F
    )


class WordPiece:
    """Uncased BERT word pieces of a text, as vocabulary ids.

    Args:
        vocab: Piece -> id; must hold ``[UNK]``.
    """

    def __init__(self, vocab: dict[str, int]) -> None:
        self.vocab = vocab
        self.unk = vocab["[UNK]"]
        # a conversation repeats its words: cut each distinct word once per process
        self._pieces = lru_cache(maxsize=2**16)(self._cut)

    def encode(self, text: str) -> list[int]:
        """The ids of `text`'s word pieces, without [CLS] and [SEP]."""
        ids: list[int] = []
        for word in self._words(text):
            ids.extend(self._pieces(word))
        return ids

    def _words(self, text: str) -> list[str]:
        chars = []
        for char in text:
            code = ord(char)
            if code == 0 or code == 0xFFFD or _is_control(char):
                continue
            if _is_whitespace(char):
                chars.append(" ")
            elif _is_cjk(code):
                chars.append(f" {char} ")
            else:
                chars.append(char)
        words: list[str] = []
        for token in "".join(chars).split():
            token = unicodedata.normalize("NFD", token.lower())
            token = "".join(c for c in token if unicodedata.category(c) != "Mn")
            current = ""
            for char in token:
                if _is_punctuation(char):
                    if current:
                        words.append(current)
                    words.append(char)
                    current = ""
                else:
                    current += char
            if current:
                words.append(current)
        return words

    def _cut(self, word: str) -> tuple[int, ...]:
        """Greedy longest-match pieces of one word, or ``[UNK]`` alone."""
        if len(word) > _MAX_WORD_CHARS:
            return (self.unk,)
        out, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else f"##{word[start:end]}"
                if piece in self.vocab:
                    out.append(self.vocab[piece])
                    break
                end -= 1
            else:
                return (self.unk,)
            start = end
        return tuple(out)
