"""Names vulture reports as unused that are used, by a framework or a library rather than by a
call it can see. Vulture reads this file (``vulture kb agents pipeline ci vulture_whitelist.py``);
nothing imports or runs it. A name listed here counts as used everywhere, so list only what is
used dynamically, grouped by why, and remove an entry when its definition goes.
"""

# ruff: noqa: B018  (each line is an attribute access kept only for vulture to read)


class _Used:
    """Absorbs attribute access, so each line below is valid Python that names one attribute."""

    def __getattr__(self, name: str) -> "_Used":
        return self


_ = _Used()

# typer registers these through decorators (@app.callback, @app.command) and calls them.
_._root  # kb/cli/app.py: the callback that takes the global --repo option
_.eval_retrieval  # kb/cli/evaluate.py: `kb eval retrieval`
_.list_items  # kb/cli/evidence.py: `kb evidence list`
_.consolidate  # kb/cli/consolidate.py: `kb consolidate`, the group's callback
_.pr_open  # kb/cli/pr.py: `kb pr open`
_.pr_review  # kb/cli/pr.py: `kb pr review`
_.pr_merge  # kb/cli/pr.py: `kb pr merge`
_.pr_gate  # kb/cli/pr.py: `kb pr gate`
_.pr_list  # kb/cli/pr.py: `kb pr list`
_.pr_status  # kb/cli/pr.py: `kb pr status`
_.github_init  # kb/cli/pr.py: `kb github init`
_.retention_apply  # kb/cli/forget.py: `kb retention apply`

# pydantic reads these: model configuration and validators registered by decorator.
_.model_config  # agents/schemas.py, agents/tools.py, kb/config.py, pipeline/eval/judge.py
_._ordered  # agents/tools.py: ReadEvidenceArgs' @model_validator (end not before start)
_._claim_faults_name_both_lines  # agents/schemas.py: ReviewComment's @model_validator (claim faults give both lines)
_._timestamp  # pipeline/records.py: ReviewRecord's @field_validator on at (ISO date-time)
_._comments  # pipeline/records.py: ReviewRecord's @field_validator on comments (each a Comment)
_._no_reserved_or_secret_options  # kb/config.py: ModelRole's @field_validator on options
_._fingerprints  # kb/config.py: Secrets' @field_validator on allow (fingerprints only)
_._owner_name  # kb/config.py: Forge's @field_validator on repository (owner/name)
_._env_name  # kb/config.py: Forge's @field_validator on the token variables (names, never tokens)
_._url  # kb/config.py: Forge's @field_validator on api_url
_._without_unset  # pipeline/consolidate/record.py: the records' @model_serializer (keys absent until set)
_.job  # pipeline/consolidate/record.py: FoundRecord.job, a field only written to the record
_._branch_name  # kb/config.py: Forge's @field_validator on default_branch (a valid git branch name)
_._hosted_needs_a_repository  # kb/config.py: Forge's @model_validator (a hosted forge names its repository)
_._retention_rules  # kb/config.py: Config's @field_validator on retention (kinds or scopes, ages in days)

# Fields of model output and of records written as JSON (asdict / model_dump): they are read
# by the model that fills them, by people and by the benchmarks, not by kb's own code.
_.rationale  # agents/schemas.py: Submission.rationale, the Proposer's explanation
_.proposer_model  # pipeline/records.py: ReviewRecord, in the review notes
_.gate_errors  # pipeline/records.py: ReviewRecord, in the review notes
_.kept_flagged  # pipeline/records.py: ReviewRecord, in the review notes (issue 13)
_.merged_at  # pipeline/merge.py: MergeRecord, in reviews/<year>/<slug>.json
_.embed_seconds  # kb/retrieval/build.py: BuildResult.to_dict(), read by bench/retrieval_scale.py

# Attributes set for a third-party library, which reads them.
_.suppress_debug_info  # agents/llm.py: litellm's switch for its help banners
_.original  # kb/retrieval/analyzer.py: whoosh Token fields the tokenizer fills
_.startchar  # kb/retrieval/analyzer.py
_.endchar  # kb/retrieval/analyzer.py
_.__module__  # kb/retrieval/analyzer.py: where pickle finds MixedTokenizer ...
_.__qualname__  # kb/retrieval/analyzer.py
_.__getattr__  # kb/retrieval/analyzer.py: ... the module hook that builds it on lookup
_.sel  # kb/retrieval/search.py: faiss SearchParameters.sel, the row filter of a search
_.weighting  # kb/retrieval/search.py: whoosh Searcher.weighting, the BM25F parameters
_._usage_display_name  # kb/cli/app.py: typer's help, in plain words
_._rich_display_name  # kb/cli/app.py
_.display_type_rich  # kb/cli/app.py

# Library API exercised only by the tests (kept as API, not dead).
_.parse_definition  # kb/citations.py: tests/test_page_format_owner.py
_.parse_claim_bullet  # kb/citations.py: tests/test_page_format_owner.py
_.remaining_budget  # agents/loop.py: tests/agents/test_loop.py
_.status_of  # pipeline/records.py: tests/pipeline/test_offline_loop.py, tests/integration/test_model_loop.py

# Config fields read by name (kb/config.py Privacy.kinds: getattr over kb.privacy.KINDS).
_.national_id
_.ssn
_.card
_.iban
_.phone
_.ip
_.dob
_.person
_.health

# onnxruntime reads these SessionOptions attributes when the session is created.
_.intra_op_num_threads  # kb/retrieval/minilm.py
_.inter_op_num_threads  # kb/retrieval/minilm.py
_.enable_cpu_mem_arena  # kb/retrieval/minilm.py
_.log_severity_level  # kb/retrieval/minilm.py
_.graph_optimization_level  # kb/retrieval/e5_ort.py: an onnxruntime session option
_.ir_version  # kb/retrieval/e5_ort.py: the ONNX model field onnxruntime reads

# MCP tools, resources and commands registered by decorator (pipeline/mcp/server.py, kb/cli/mcp.py);
# the SDK calls verify_token of the TokenVerifier protocol (pipeline/mcp/auth.py).
_.kb_overview
_.kb_search
_.kb_read
_.kb_grep
_.kb_evidence
_.kb_memory_context
_.kb_history
_.kb_change_status
_.kb_remember
_.kb_propose
_.page_l0
_.page_l1
_.page_resource
_.evidence_resource
_.overview_resource  # kb mcp: registered by @server.resource
_.subscribe  # pipeline.mcp.subscriptions.ServedBus: the SDK's SubscriptionBus protocol
_.serve
_.install
_.verify_token
_.kb_forget
