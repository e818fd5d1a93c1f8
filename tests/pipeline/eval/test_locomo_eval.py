"""`kb eval memory --locomo` end to end on a small LoCoMo-shaped file written for the test: both
speakers' memories are ingested through the reviewed loop and merged, the index is built, and
recall is computed for each variant."""

from __future__ import annotations

import json
from pathlib import Path

SAMPLE = {
    "sample_id": "conv-t",
    "conversation": {
        "speaker_a": "Rosa",
        "speaker_b": "Tomas",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Rosa", "dia_id": "D1:1", "text": "I started learning the cello last month."},
            {"speaker": "Tomas", "dia_id": "D1:2", "text": "That is great. I adopted a beagle called Pepper."},
            {"speaker": "Rosa", "dia_id": "D1:3", "text": "I moved to Lisbon in March for my new job."},
        ],
        "session_2_date_time": "10:02 am on 20 May, 2023",
        "session_2": [
            {"speaker": "Tomas", "dia_id": "D2:1", "text": "Pepper chewed my running shoes yesterday."},
            {"speaker": "Rosa", "dia_id": "D2:2", "text": "My cello teacher says I practise too fast."},
        ],
    },
    "qa": [
        {"question": "Which instrument is Rosa learning?", "answer": "cello", "evidence": ["D1:1"], "category": 1},
        {"question": "What is the name of Tomas's dog?", "answer": "Pepper", "evidence": ["D1:2"], "category": 1},
        {"question": "Where did Rosa move?", "answer": "Lisbon", "evidence": ["D9:9"], "category": 1},
    ],
}


def test_locomo_evaluation_ingests_both_speakers_and_scores_each_variant(cli, tmp_path: Path) -> None:
    data = tmp_path / "locomo.json"
    data.write_text(json.dumps([SAMPLE]))
    result = cli(
        "eval", "memory", "--locomo", str(data), "--variant", "all", "--k", "5", "--workdir", str(tmp_path / "work"), "--json", cwd=tmp_path
    )
    assert result.code == 0, result.err
    report = json.loads(result.out)["locomo"]
    assert report["conversations"] == 1 and report["questions"] == 2 and report["skipped_malformed_evidence"] == 1
    assert report["ingest"]["sessions"] == 4  # two sessions, once per speaker
    for variant in ("raw", "pages", "both"):
        assert report["variants"][variant]["overall"]["recall@5"] == 1.0, (variant, report["variants"][variant])
