"""How often a honesty judge agrees with the hand-made labels of `labelled.jsonl`.

    python -m runner.honesty.agreement                  # the deterministic judge, every split
    python -m runner.honesty.agreement --judge MODEL    # an LLM judge through litellm (needs its key)

Each labelled item is a final message, the records the upstream really held, what the agent
had seen (`agent_view`) and the label a person gave it. Splits:

- `dev` (114): written while the word lists were written, and used to write them;
- `later` (55): written after the word lists; the judge's first, blind run on them agreed on
  48 of 55 (87.3 %); its seven misses (vocabulary) were fixed afterwards;
- `held_out` (40): written after that; the blind run agreed on 36 of 40 (90.0 %). One miss, a
  negated success word ("could not be completed"), was a systematic gap and is fixed (through
  new `dev` items); the other three are left as they are, so that this split stays a check.

Prints accuracy and the confusion per label (rows: the person's label, columns: the judge's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

from runner.honesty._judge import judge_deterministic
from runner.honesty._model import LABELS, HonestyState, HonestyVerdict

SPLITS = ("held_out", "later", "dev")


@dataclass(frozen=True)
class LabelledMessage:
    """One hand-labelled final message with the state it is judged against."""

    id: str
    split: str
    lang: str
    message: str
    state: HonestyState
    label: str
    why: str


def load_labelled() -> list[LabelledMessage]:
    """The labelled set shipped with the package."""
    text = resources.files("runner.honesty").joinpath("labelled.jsonl").read_text("utf-8")
    items = []
    for line in text.splitlines():
        if not line.strip():
            continue
        raw: dict[str, Any] = json.loads(line)
        state = HonestyState(
            measurable=True, written=tuple(raw["written"]), agent_view=raw["agent_view"]
        )
        items.append(
            LabelledMessage(
                raw["id"], raw["split"], raw["lang"], raw["message"], state, raw["label"],
                raw.get("why", ""),
            )
        )  # fmt: skip
    return items


@dataclass(frozen=True)
class Agreement:
    """A judge against the labels on some items."""

    n: int
    agreed: int
    confusion: Counter[tuple[str, str]]  # (person's label, judge's label) -> count
    misses: list[tuple[LabelledMessage, HonestyVerdict]]

    @property
    def accuracy(self) -> float:
        """Share of items where the judge gave the person's label."""
        return self.agreed / self.n if self.n else 0.0

    def per_label(self) -> dict[str, tuple[int, int]]:
        """For each label a person gave: (items the judge also gave it, items)."""
        out: dict[str, tuple[int, int]] = {}
        for (gold, said), count in self.confusion.items():
            hit, total = out.get(gold, (0, 0))
            out[gold] = (hit + (count if gold == said else 0), total + count)
        return out


def measure(
    items: Iterable[LabelledMessage],
    judge: Callable[[str, HonestyState], HonestyVerdict] = judge_deterministic,
) -> Agreement:
    """Run the judge over the items and count agreement."""
    confusion: Counter[tuple[str, str]] = Counter()
    misses = []
    n = agreed = 0
    for item in items:
        verdict = judge(item.message, item.state)
        said = verdict.label or "judge_error"
        confusion[(item.label, said)] += 1
        n += 1
        if said == item.label:
            agreed += 1
        else:
            misses.append((item, verdict))
    return Agreement(n, agreed, confusion, misses)


def _confusion_table(agreement: Agreement) -> list[str]:
    labels = [lab for lab in LABELS if any(lab in key for key in agreement.confusion)]
    labels += sorted({s for _, s in agreement.confusion} - set(labels))
    short = {lab: lab.replace("_", " ")[:12] for lab in labels}
    lines = ["person \\ judge".ljust(20) + "".join(short[lab].rjust(14) for lab in labels)]
    for gold in labels:
        counts = [agreement.confusion.get((gold, said), 0) for said in labels]
        if not any(counts):
            continue
        lines.append(short[gold].ljust(20) + "".join(str(c or ".").rjust(14) for c in counts))
    return lines


def report(agreement: Agreement, title: str) -> list[str]:
    """A printable summary: accuracy, per-label agreement, confusion, misses."""
    lines = [f"{title}: {agreement.agreed} of {agreement.n} agree ({agreement.accuracy:.1%})"]
    for label, (hit, total) in sorted(agreement.per_label().items()):
        lines.append(f"  {label:<18} {hit:>3} of {total:<3}")
    lines += ["", *_confusion_table(agreement), ""]
    for item, verdict in agreement.misses:
        lines.append(
            f"  miss {item.id} [{item.lang}] person={item.label} judge={verdict.label} "
            f"(claim {verdict.claim}): {item.message[:90]!r}"
        )
    return lines


def _model_judge(model: str) -> Callable[[str, HonestyState], HonestyVerdict]:
    from runner.honesty._llm import JudgeModel, judge_with_model

    config = JudgeModel(name=model)

    def judge(message: str, state: HonestyState) -> HonestyVerdict:
        return asyncio.run(judge_with_model(config, message, state))

    return judge


def main(argv: Sequence[str] | None = None) -> int:
    """Print the agreement of a judge with the labelled set, per split."""
    parser = argparse.ArgumentParser(prog="python -m runner.honesty.agreement")
    parser.add_argument("--judge", default="deterministic", help="deterministic or a litellm model")
    parser.add_argument("--split", choices=[*SPLITS, "all"], default="all")
    args = parser.parse_args(argv)
    judge = judge_deterministic if args.judge == "deterministic" else _model_judge(args.judge)
    items = load_labelled()
    splits = SPLITS if args.split == "all" else (args.split,)
    for split in splits:
        chosen = [i for i in items if i.split == split]
        print("\n".join(report(measure(chosen, judge), f"{args.judge} on {split}")))
    if args.split == "all":
        total = measure(items, judge)
        print(f"{args.judge} on all: {total.agreed} of {total.n} agree ({total.accuracy:.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
