"""LoCoMo loader for the official format (``locomo10.json`` or our dev subset).

The data is CC BY-NC 4.0 and is read from where it lies, never copied into the
repository. Path: ``--data``, else ``$LOCOMO_PATH``, else
``../shared/data/locomo/locomo_dev.json`` beside the repository.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from evals.datasets.records import Conversation, Question, Turn

DEFAULT_PATH = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "locomo" / "locomo_dev.json"


class DataNotFound(FileNotFoundError):
    """The LoCoMo file is not where the arguments, ``$LOCOMO_PATH`` or the default say."""


def data_path(path: str | os.PathLike | None = None) -> Path:
    """Resolve the dataset path: argument, then ``$LOCOMO_PATH``, then the shared dev file.

    Raises:
        DataNotFound: Naming the path tried and `LOCOMO_PATH`.
    """
    resolved = Path(path or os.environ.get("LOCOMO_PATH") or DEFAULT_PATH)
    if not resolved.is_file():
        source = "--data" if path else "$LOCOMO_PATH" if os.environ.get("LOCOMO_PATH") else "the default"
        raise DataNotFound(
            f"LoCoMo data not found at {resolved} ({source}): set LOCOMO_PATH=/path/to/locomo10.json "
            "(the official file, or the dev subset) or pass --data PATH."
        )
    return resolved


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of the dataset file, recorded in every results header."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _turn_text(raw: dict) -> str:
    text = str(raw.get("text", ""))
    caption = raw.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


_DIA_ID = re.compile(r"D:?\s*(\d+)\s*:\s*(\d+)")


def _dia_ids(text: str) -> list[str]:
    """Turn ids in `text`, normalized (``D:11:26`` -> ``D11:26``, ``D3:05`` -> ``D3:5``)."""
    return [f"D{int(m.group(1))}:{int(m.group(2))}" for m in _DIA_ID.finditer(str(text))]


def _evidence(raw, turn_ids: set[str]) -> tuple[str, ...]:
    """Evidence ids; some entries hold several ids in one string (``"D8:6; D9:17"``), some are
    malformed (``"D:11:26"``). Ids naming no turn of the conversation are dropped (in the dev
    file, two questions cite one such turn each besides valid ones)."""
    ids = [i for item in raw or [] for i in _dia_ids(item)]
    return tuple(i for i in dict.fromkeys(ids) if i in turn_ids)


def parse_sample(sample: dict) -> Conversation:
    """One official LoCoMo record -> `Conversation`."""
    conv = sample["conversation"]
    sessions = sorted((int(m.group(1)), key) for key in conv if (m := re.fullmatch(r"session_(\d+)", key)))
    turns = []
    for number, key in sessions:
        date = str(conv.get(f"{key}_date_time", ""))
        for raw in conv[key] or []:
            dia_id = next(iter(_dia_ids(raw["dia_id"])), str(raw["dia_id"]))
            turns.append(Turn(dia_id, raw["speaker"], _turn_text(raw), number, date))
    turn_ids = {t.dia_id for t in turns}
    questions = []
    for qa in sample.get("qa", []):
        answer = qa.get("answer", qa.get("adversarial_answer", ""))
        evidence = _evidence(qa.get("evidence"), turn_ids)
        questions.append(Question(qa["question"], str(answer), evidence, int(qa["category"])))
    speakers = (conv.get("speaker_a", ""), conv.get("speaker_b", ""))
    return Conversation(str(sample.get("sample_id", "")), tuple(turns), tuple(questions), speakers)


def load_locomo(path: str | os.PathLike | None = None, *, limit: int | None = None) -> list[Conversation]:
    """Load every conversation (or the first `limit`) from an official-format file."""
    with open(data_path(path), encoding="utf-8") as f:
        samples = json.load(f)
    return [parse_sample(s) for s in samples[:limit]]
