"""Writes conversations.jsonl and questions.jsonl of the assistant-sessions
dataset from script.py and bank.py (deterministic: same files every run).

    python3 generate.py
"""

import json
import random
from pathlib import Path

from bank import TOPICS
from script import CONVERSATIONS

LEADS = [
    "For {project}, this is how I would go about it.",
    "Good question for {project}; here is the approach I would take.",
    "Here is what I would do in {project}, roughly in order of impact.",
    "Thinking about {project} specifically, a few points.",
]
OPENERS = ["", "Quick question. ", "Another thing. ", "Back to the project. "]
# Technical exchanges added to every session at seeded random places, so a
# conversation is long and most of it is technical talk no question needs.
EXTRA_FILLERS_PER_SESSION = 6


def paragraphs(rng, topic, n):
    paras = list(TOPICS[topic]["paras"])
    rng.shuffle(paras)
    return paras[:n]


def build(conv):
    rng = random.Random(conv["id"])
    sessions, labels = [], {}
    for s_index, (date, items) in enumerate(conv["sessions"], start=1):
        turns = []
        items = list(items)
        for _ in range(EXTRA_FILLERS_PER_SESSION):
            items.insert(rng.randrange(len(items) + 1), ("fill", rng.choice(sorted(TOPICS))))

        def add(speaker, text, label=None):
            turn_id = f"D{s_index}:{len(turns) + 1}"
            turns.append({"turn_id": turn_id, "speaker": speaker, "text": text})
            if label is not None:
                if label in labels:
                    raise SystemExit(f"{conv['id']}: label {label} twice")
                labels[label] = (turn_id, f"S{s_index}")

        for item in items:
            if item[0] == "key":
                _, label, user, lead, topic = item
                add("user", user, label)
                add("assistant", " ".join([lead] + paragraphs(rng, topic, 2)), label + "/a")
            else:
                _, topic = item
                ask = rng.choice(TOPICS[topic]["asks"])
                add("user", rng.choice(OPENERS) + ask)
                lead = rng.choice(LEADS).format(project=conv["project"])
                other = rng.choice(sorted(t for t in TOPICS if t != topic))
                body = paragraphs(rng, topic, 2) + paragraphs(rng, other, 1)
                add("assistant", " ".join([lead] + body))
        sessions.append({"session_id": f"S{s_index}", "date_time": date, "turns": turns})
    questions = []
    for q_index, (category, text, evidence) in enumerate(conv["questions"]):
        missing = [e for e in evidence if e not in labels]
        if missing:
            raise SystemExit(f"{conv['id']}: question {text!r} names unknown {missing}")
        questions.append({
            "conversation_id": conv["id"],
            "question_id": f"{conv['id']}_q{q_index}",
            "question": text,
            "category": category,
            "category_name": category,
            "evidence": [labels[e][0] for e in evidence],
            "evidence_sessions": sorted({labels[e][1] for e in evidence}),
        })
    record = {
        "conversation_id": conv["id"],
        "speaker_a": "user",
        "speaker_b": "assistant",
        "sessions": sessions,
    }
    return record, questions


def main():
    here = Path(__file__).parent
    records, questions = [], []
    for conv in CONVERSATIONS:
        record, qs = build(conv)
        records.append(record)
        questions.extend(qs)
    with open(here / "conversations.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    with open(here / "questions.jsonl", "w") as f:
        for q in questions:
            f.write(json.dumps(q, ensure_ascii=False) + "\n")
    turns = [t for r in records for s in r["sessions"] for t in s["turns"]]
    words = [len(t["text"].split()) for t in turns if t["speaker"] == "assistant"]
    cats = {}
    for q in questions:
        cats[q["category"]] = cats.get(q["category"], 0) + 1
    print(f"{len(records)} conversations, {sum(len(r['sessions']) for r in records)} sessions, "
          f"{len(turns)} messages, {len(questions)} questions; "
          f"assistant messages {min(words)}-{max(words)} words, mean {sum(words) / len(words):.0f}; "
          f"categories {dict(sorted(cats.items()))}")


if __name__ == "__main__":
    main()
