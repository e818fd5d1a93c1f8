"""Presidio (presidio-analyzer + presidio-anonymizer, configured fully offline) against kb's own
detectors (kb.privacy) on the labelled set of bench/privacy_detection.py: precision and recall
per kind, throughput, start-up time and install size (docs/benchmarks.md, docs/privacy.md).

Presidio is not a kb dependency: install it into a throwaway virtual environment, then run this
script with the project's Python from the repository root; it runs the presidio side in that
environment (optionally with no network at all, ``--no-network``, through ``unshare -n``):

    python3 -m venv /tmp/presidio-venv
    /tmp/presidio-venv/bin/pip install 'presidio-analyzer==2.2.*' 'presidio-anonymizer==2.2.*'
    PYTHONPATH=. python bench/presidio_compare.py --presidio-python /tmp/presidio-venv/bin/python --no-network

Offline configuration (../shared/NOTES.md): a blank spaCy English pipeline saved to disk and
passed by path (so no model is downloaded; the pattern recognizers run, the name/place NER does
not), and ``TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS=""`` (no public-suffix list fetched for e-mails).
Every text is analysed as English (presidio's recognizers are registered per language; its
predefined ones for ``en``), with its predefined recognizers only: the Chinese resident id,
Chinese mobile numbers and addresses have none.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# presidio entity -> kb kind (other entities, URL, UUID, ..., are not scored)
ENTITIES = {
    "US_SSN": "ssn",
    "CREDIT_CARD": "card",
    "IBAN_CODE": "iban",
    "PHONE_NUMBER": "phone",
    "EMAIL_ADDRESS": "email",
    "IP_ADDRESS": "ip",
    "DATE_TIME": "dob",
    "LOCATION": "address",
}


def _corpus(texts: list[str]) -> str:
    """The throughput text: the labelled sentences and ordinary ones (as bench/privacy_detection.py),
    about 100 kB (presidio runs at tens of kB/s)."""
    block = "\n".join(texts) + "\n" + "An ordinary sentence about travel plans and window seats. " * 40 + "\n"
    return block * max(1, 100_000 // len(block.encode()))


def worker(data_path: str) -> None:
    """Runs in the presidio environment: analyse every text, time it, print JSON."""
    os.environ["TLDEXTRACT_PUBLIC_SUFFIX_LIST_URLS"] = ""
    started = time.perf_counter()
    import spacy
    from presidio_analyzer import AnalyzerEngine
    from presidio_analyzer.nlp_engine import NlpEngineProvider
    from presidio_anonymizer import AnonymizerEngine

    imported = time.perf_counter()
    texts = json.loads(Path(data_path).read_text(encoding="utf-8"))
    model = Path(tempfile.mkdtemp(prefix="presidio-blank-")) / "en"
    spacy.blank("en").to_disk(model)
    config = {"nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": str(model)}]}
    analyzer = AnalyzerEngine(nlp_engine=NlpEngineProvider(nlp_configuration=config).create_engine(), supported_languages=["en"])
    anonymizer = AnonymizerEngine()
    analyzer.analyze("warm up 4111 1111 1111 1111", language="en")
    ready = time.perf_counter()
    found = [[(r.entity_type, r.start, r.end, r.score) for r in analyzer.analyze(text, language="en")] for text in texts]
    corpus = _corpus(texts)
    lines = corpus.split("\n")
    t0 = time.perf_counter()
    results = [analyzer.analyze(line, language="en") for line in lines]
    t1 = time.perf_counter()
    for line, result in zip(lines, results, strict=True):
        anonymizer.anonymize(text=line, analyzer_results=result)  # type: ignore[arg-type]
    t2 = time.perf_counter()
    size = len(corpus.encode())
    print(
        json.dumps(
            {
                "found": found,
                "import_s": imported - started,
                "ready_s": ready - started,
                "analyze_mb_s": size / (t1 - t0) / 1e6,
                "analyze_anonymize_mb_s": size / (t2 - t0) / 1e6,
                "bytes": size,
                "recognizers": sorted({e for r in analyzer.registry.recognizers for e in r.supported_entities}),
            }
        )
    )


def _score(gold: list[set[tuple[str, str]]], got: list[set[tuple[str, str]]], kinds: tuple[str, ...]) -> dict[str, tuple[int, int, int]]:
    out = {}
    for kind in kinds:
        tp = fp = fn = 0
        for want, have in zip(gold, got, strict=True):
            w = {v for k, v in want if k == kind}
            h = {v for k, v in have if k == kind}
            tp, fp, fn = tp + len(w & h), fp + len(h - w), fn + len(w - h)
        out[kind] = (tp, fp, fn)
    return out


def _site_packages_mb(python: str) -> float:
    path = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True, text=True, check=True
    )
    total = sum(f.stat().st_size for f in Path(path.stdout.strip()).rglob("*") if f.is_file())
    return total / 1e6


def _our_throughput(corpus: str) -> tuple[int, float, float]:
    """(bytes, MB/s detecting, MB/s masking) of kb.privacy over ``corpus``, line by line."""
    from kb.privacy import KINDS, find_personal_data, mask

    t0 = time.perf_counter()
    for line in corpus.split("\n"):
        find_personal_data(line)
    t1 = time.perf_counter()
    for line in corpus.split("\n"):
        mask(line, KINDS)
    t2 = time.perf_counter()
    size = len(corpus.encode())
    return size, size / (t1 - t0) / 1e6, size / (t2 - t1) / 1e6


def _ratio(a: int, b: int) -> str:
    return f"{a / b:.2f}" if b else "-"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--presidio-python", default="/tmp/presidio-venv/bin/python")
    parser.add_argument("--no-network", action="store_true", help="run the presidio side under `unshare -n` (no network)")
    parser.add_argument("--misses", action="store_true", help="list each value presidio missed or added")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.worker)
        return 0

    import platform

    from bench.privacy_detection import LABELLED
    from kb.privacy import KINDS, find_personal_data, normalise

    timer = "import time; t = time.perf_counter(); import kb.privacy; print(time.perf_counter() - t)"
    ours_import = float(subprocess.run([sys.executable, "-c", timer], capture_output=True, text=True, check=True).stdout)
    texts = [t for t, _ in LABELLED]
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "texts.json"
        data.write_text(json.dumps(texts), encoding="utf-8")
        command = [args.presidio_python, str(Path(__file__).resolve()), "--worker", str(data)]
        if args.no_network:
            command = ["unshare", "-n", *command]
        run = subprocess.run(command, capture_output=True, text=True, check=False)
    if run.returncode:
        print(run.stderr[-3000:], file=sys.stderr)
        return 1
    presidio = json.loads(run.stdout.strip().splitlines()[-1])
    gold = [{(k, normalise(k, v)) for k, v in labels} for _, labels in LABELLED]
    theirs = [
        {(ENTITIES[e], normalise(ENTITIES[e], text[s:t])) for e, s, t, _score in found if e in ENTITIES}
        for text, found in zip(texts, presidio["found"], strict=True)
    ]
    ours = [{(h.kind, h.normalised) for h in find_personal_data(text)} for text in texts]
    kinds = tuple(k for k in KINDS if any(k == kind for g in gold for kind, _ in g))  # person, health: model only
    mine, other = _score(gold, ours, kinds), _score(gold, theirs, kinds)
    print(f"machine: {platform.platform()}, {os.cpu_count()} cores, Python {platform.python_version()}")
    print(
        f"labelled set: {len(LABELLED)} sentences, {sum(len(g) for g in gold)} values; presidio network: {'none (unshare -n)' if args.no_network else 'not blocked'}\n"
    )
    print("| kind | values | kb precision | kb recall | presidio precision | presidio recall |")
    print("|---|---|---|---|---|---|")
    for kind in kinds:
        (tp, fp, fn), (ptp, pfp, pfn) = mine[kind], other[kind]
        print(
            f"| {kind} | {tp + fn} | {_ratio(tp, tp + fp)} | {_ratio(tp, tp + fn)} | {_ratio(ptp, ptp + pfp)} | {_ratio(ptp, ptp + pfn)} |"
        )
    if args.misses:
        for text, want, have in zip(texts, gold, theirs, strict=True):
            for label, values in (("missed", want - have), ("extra", have - want)):
                for kind, value in sorted(values):
                    print(f"  presidio {label} {kind} {value!r} in {text!r}")
    size, detect, masking = _our_throughput(_corpus(texts))
    print(f"\nthroughput over {size:,} bytes, line by line, one thread:")
    print(f"  kb.privacy: detect {detect:.2f} MB/s, mask (detect + replace) {masking:.2f} MB/s")
    print(f"  presidio:   analyze {presidio['analyze_mb_s']:.3f} MB/s, analyze + anonymize {presidio['analyze_anonymize_mb_s']:.3f} MB/s")
    print(
        f"start-up: kb.privacy import {ours_import:.2f} s; presidio import {presidio['import_s']:.2f} s, ready {presidio['ready_s']:.2f} s"
    )
    print(
        f"install size: presidio environment site-packages {_site_packages_mb(args.presidio_python):.0f} MB; kb.privacy needs the standard library only"
    )
    print(f"presidio recognizers loaded: {', '.join(presidio['recognizers'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
