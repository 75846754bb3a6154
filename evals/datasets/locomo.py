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


def data_path(path: str | os.PathLike | None = None) -> Path:
    """Resolve the dataset path: argument, then ``$LOCOMO_PATH``, then the shared dev file."""
    resolved = Path(path or os.environ.get("LOCOMO_PATH") or DEFAULT_PATH)
    if not resolved.exists():
        raise FileNotFoundError(
            f"LoCoMo data not found at {resolved}. Pass --data PATH or set LOCOMO_PATH "
            "to the official locomo10.json (or the dev subset)."
        )
    return resolved


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of the dataset file, recorded in every results header."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _turn_text(raw: dict) -> str:
    text = str(raw.get("text", ""))
    caption = raw.get("blip_caption")
    return f"{text} [shares a photo: {caption}]" if caption else text


def _evidence(raw) -> tuple[str, ...]:
    """Evidence ids; some entries hold several ids in one string (``"D8:6; D9:17"``)."""
    ids: list[str] = []
    for item in raw or []:
        ids += [m.group(0) for m in re.finditer(r"D\d+:\d+", str(item))]
    return tuple(dict.fromkeys(ids))


def parse_sample(sample: dict) -> Conversation:
    """One official LoCoMo record -> `Conversation`."""
    conv = sample["conversation"]
    sessions = sorted(
        (int(m.group(1)), key) for key in conv if (m := re.fullmatch(r"session_(\d+)", key))
    )
    turns = []
    for number, key in sessions:
        date = str(conv.get(f"{key}_date_time", ""))
        for raw in conv[key] or []:
            turns.append(Turn(raw["dia_id"], raw["speaker"], _turn_text(raw), number, date))
    questions = []
    for qa in sample.get("qa", []):
        answer = qa.get("answer", qa.get("adversarial_answer", ""))
        questions.append(Question(qa["question"], str(answer), _evidence(qa.get("evidence")), int(qa["category"])))
    speakers = (conv.get("speaker_a", ""), conv.get("speaker_b", ""))
    return Conversation(str(sample.get("sample_id", "")), tuple(turns), tuple(questions), speakers)


def load_locomo(path: str | os.PathLike | None = None, *, limit: int | None = None) -> list[Conversation]:
    """Load every conversation (or the first `limit`) from an official-format file."""
    with open(data_path(path), encoding="utf-8") as f:
        samples = json.load(f)
    return [parse_sample(s) for s in samples[:limit]]
