"""Mutation operators for the gate benchmark (``kb eval gate``): seeded edits of merged pages.

Each operator reads one merged page (and the evidence it cites) and returns every edit it can
make there, as whole new file contents. Three categories:

- ``structural``: the page's form is broken (citation, footnote, link, header);
- ``grounding``: the form holds but a claim no longer says what its evidence says (numbers,
  units, dates, negations, names, speakers, fact cards, timeline dates, L0/Overview,
  quantifiers, instructions, evidence added by the change itself);
- ``control``: faithful edits that must pass (a date or number written another way, a
  negation reworded, bullets reordered, whitespace, a correctly cited claim added).

Operators are pure: text in, candidate edits out. ``pipeline.eval.gate`` samples them with a
seed and judges each on its own work branch.
"""

from __future__ import annotations

from pipeline.eval.mutations_base import CATEGORIES, Category, Corpus, Mutant, Operator, PageView, collect_proper_nouns
from pipeline.eval.mutations_controls import (
    bullets_reordered,
    cited_claim_added,
    date_of_saying_added,
    negation_rewording,
    number_form,
    reformat_date,
    rewording_control,
    summary_from_claim,
    whitespace_changed,
)
from pipeline.eval.mutations_grounding import (
    citation_swapped,
    date_changed,
    evidence_added_on_branch,
    fact_card_changed,
    instruction_inserted,
    negation_added,
    negation_removed,
    negation_removed_quote_trimmed,
    number_changed,
    number_word_changed,
    other_speaker_attributed,
    overview_unsupported,
    past_as_current,
    proper_noun_swapped,
    quantifier_added,
    summary_unsupported,
    timeline_heading_changed,
    unit_changed,
    wrong_number_sentence,
)
from pipeline.eval.mutations_meaning import (
    cause_invented,
    condition_moved,
    inflated,
    modality_changed,
    modality_reworded,
    qualifier_dropped,
    relative_day_as_said,
    relative_day_resolved,
    sides_swapped,
    uncited_sentence_changed,
)
from pipeline.eval.mutations_structural import (
    citation_ref_deleted,
    citation_span_changed,
    footnote_def_deleted,
    frontmatter_broken,
    link_broken,
    quote_altered,
    uncited_bullet_added,
)

__all__ = ["CATEGORIES", "OPERATORS", "Category", "Corpus", "Mutant", "Operator", "PageView", "collect_proper_nouns"]

OPERATORS: dict[str, tuple[Category, Operator]] = {
    "footnote_def_deleted": ("structural", footnote_def_deleted),
    "citation_ref_deleted": ("structural", citation_ref_deleted),
    "uncited_bullet_added": ("structural", uncited_bullet_added),
    "link_broken": ("structural", link_broken),
    "frontmatter_broken": ("structural", frontmatter_broken),
    "quote_altered": ("structural", quote_altered),
    "citation_span_changed": ("structural", citation_span_changed),
    "number_changed": ("grounding", number_changed),
    "number_word_changed": ("grounding", number_word_changed),
    "unit_changed": ("grounding", unit_changed),
    "date_changed": ("grounding", date_changed),
    "negation_removed": ("grounding", negation_removed),
    "negation_removed_quote_trimmed": ("grounding", negation_removed_quote_trimmed),
    "negation_added": ("grounding", negation_added),
    "quantifier_added": ("grounding", quantifier_added),
    "proper_noun_swapped": ("grounding", proper_noun_swapped),
    "citation_swapped": ("grounding", citation_swapped),
    "other_speaker_attributed": ("grounding", other_speaker_attributed),
    "fact_card_changed": ("grounding", fact_card_changed),
    "timeline_heading_changed": ("grounding", timeline_heading_changed),
    "summary_unsupported": ("grounding", summary_unsupported),
    "overview_unsupported": ("grounding", overview_unsupported),
    "wrong_number_sentence": ("grounding", wrong_number_sentence),
    "past_as_current": ("grounding", past_as_current),
    "instruction_inserted": ("grounding", instruction_inserted),
    "evidence_added_on_branch": ("grounding", evidence_added_on_branch),
    "modality_changed": ("grounding", modality_changed),
    "qualifier_dropped": ("grounding", qualifier_dropped),
    "cause_invented": ("grounding", cause_invented),
    "inflated": ("grounding", inflated),
    "sides_swapped": ("grounding", sides_swapped),
    "uncited_sentence_changed": ("grounding", uncited_sentence_changed),
    "relative_day_as_said": ("grounding", relative_day_as_said),
    "bullets_reordered": ("control", bullets_reordered),
    "whitespace_changed": ("control", whitespace_changed),
    "cited_claim_added": ("control", cited_claim_added),
    "date_reformatted": ("control", rewording_control("date_reformatted", reformat_date)),
    "number_form_changed": ("control", rewording_control("number_form_changed", number_form)),
    "negation_reworded": ("control", rewording_control("negation_reworded", negation_rewording)),
    "date_of_saying_added": ("control", date_of_saying_added),
    "summary_from_claim": ("control", summary_from_claim),
    "relative_day_resolved": ("control", relative_day_resolved),
    "modality_reworded": ("control", modality_reworded),
    "condition_moved": ("control", condition_moved),
}
