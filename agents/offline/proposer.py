"""The offline Proposer: which pages to write for new evidence, without a model.

The ``plan_*`` functions are pure: they take the new evidence and the current text of the pages
they may touch and return the new text of every page to write. ``OfflineProposer`` implements
the Proposer protocol by applying a plan through the backend of its work branch.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from agents.backend import WriteBackend
from agents.offline.attributes import ATTRIBUTE_LABELS, SECTIONS, SELF_KEYS, profile_section
from agents.offline.document_plan import plan_document_pages
from agents.offline.entities import ENTITY_KINDS, entities_of_text, entity_details
from agents.offline.extractive import (
    SENTENCE_RE,
    Attribute,
    Statement,
    Withheld,
    attributes_of,
    citation_line,
    conversation_statements,
    keep_all,
    label_for,
    terminated,
    topic_of,
)
from agents.offline.indexes import new_index, upsert_index_entry
from agents.offline.memory_page import GENERATED_TAG, Entry, MemoryPage, is_generated, load_memory_page, render_memory_page
from agents.offline.profile import TOPICS
from agents.offline.revision import withdraw_flagged
from agents.protocols import AgentIdentity, EvidenceItem, ProposalTask, ProposerOutcome
from kb.config import Privacy
from kb.injection import unsafe_statement
from kb.markdown import slugify
from kb.page import page_id_for_path, parse_page, render_page
from kb.privacy import PLACEHOLDER_RE, holds
from kb.scopes import SYSTEM, user_of
from kb.tokens import count_tokens

ReadPage = Callable[[str], "str | None"]


@dataclass(frozen=True)
class Plan:
    writes: dict[str, str]  # path -> full new text
    claims: int  # new claims written
    closed: int  # older claims closed by newer ones
    evidence_ids: tuple[str, ...]


def display_name(user: str) -> str:
    """A readable name from a user id, without digits: claims are checked for every number
    they contain, so a name like "user 01" would make each claim ungrounded."""
    words = [w for w in re.split(r"[-_. ]+", user) if w and not any(c.isdigit() for c in w)]
    return " ".join(words).title() or "The user"


def _summary(text: str, limit: int = 90) -> str:
    text = " ".join(text.split())
    while count_tokens(text) > limit:
        text = " ".join(text.split()[:-3]) + "…"
    return text


def _source(statement: Statement) -> str:
    """A fact card's source: the lines its citation quotes (an answer cites its question too)."""
    end = f"-L{statement.end}" if statement.end != statement.start else ""
    return f"{statement.evidence_id}#L{statement.start}{end}"


def _entry(statement: Statement, suffix: str = "") -> Entry:
    """A statement's bullet; a relative date in it is anchored in a note (not part of the claim)."""
    note = f" _({statement.note})_" if statement.note else ""
    return Entry(f"{statement.claim}[^{label_for(statement)}]{note}{suffix}", label_for(statement), citation_line(statement))


# ---- documents ---------------------------------------------------------------------------


def document_page(item: EvidenceItem, path: str, existing: str | None, withheld: Withheld = keep_all) -> tuple[str, int]:
    lines = item.text.splitlines()
    title = next((line[2:].strip() for line in lines if line.startswith("# ")), "") or item.source or item.id
    memory = (
        load_memory_page(existing, path)
        if existing
        else MemoryPage(path, title, "fact", "system" if item.scope == "system" else item.scope)
    )
    memory.sources.add(item.id)
    memory.valid_from = memory.valid_from or item.date
    section = "Content"
    lead = ""
    added = 0
    in_fence = False
    for n, line in enumerate(lines, 1):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
            continue
        if in_fence or not stripped or stripped.startswith("|"):
            continue
        if stripped.startswith("#"):
            level = len(stripped) - len(stripped.lstrip("#"))
            if level >= 2:
                section = stripped.lstrip("#").strip() or section
            continue
        text = re.sub(r"^(?:[-*+]|\d+[.)])\s+", "", stripped)
        for ordinal, raw in enumerate(SENTENCE_RE.findall(text)):
            sentence = raw.strip()
            if len(sentence.split()) < 3 and len(sentence) < 12 or unsafe_statement(sentence) or withheld(sentence):
                continue  # too short, an injection, or personal data kept out of pages
            st = Statement(item.id, n, n, "document", sentence, terminated(sentence), item.date, False, ordinal)
            lead = lead or sentence
            if memory.has_label(label_for(st)):
                continue
            memory.sections.setdefault(section, []).append(_entry(st))
            added += 1
    summary = _summary(lead or title)
    return render_memory_page(memory, summary, overview_limit=20, leads_only=True), added


def plan_documents(items: list[EvidenceItem], read: ReadPage, withheld: Withheld = keep_all) -> Plan:
    writes: dict[str, str] = {}
    claims = 0
    index_path = "knowledge/index.md"
    index_text = read(index_path) or new_index("knowledge", "Knowledge", "Entry page of the shared knowledge.", "system")
    for item in items:
        title = next((line[2:].strip() for line in item.text.splitlines() if line.startswith("# ")), "") or item.source
        slug = slugify(re.sub(r"\.\w+$", "", title))[:60].strip("-") or item.id
        path = f"knowledge/{slug}.md"
        existing = writes.get(path) or read(path)
        if existing is not None and not is_generated(existing, path):
            path = f"knowledge/{slug}-{item.id[3:9]}.md"
            existing = writes.get(path) or read(path)
        text, added = document_page(item, path, existing, withheld)
        writes[path] = text
        claims += added
        index_text = upsert_index_entry(index_text, index_path, page_id_for_path(path), parse_page(text, path).summary)
    writes[index_path] = index_text
    return Plan(writes, claims, 0, tuple(i.id for i in items))


# ---- a user's memory ---------------------------------------------------------------------


def plan_user_memory(
    user: str,
    items: list[EvidenceItem],
    read: ReadPage,
    name: str | None = None,
    speakers: set[str] | None = None,
    withheld: Withheld = keep_all,
) -> Plan:
    """Profile, topic pages and timeline of ``users/<user>/`` updated with ``items`` (date order)."""
    name = name or display_name(user)
    draft = _MemoryDraft(user, name, read)
    user_speakers = {"user", "human", user, name, name.split()[0]} | (speakers or set())
    conversations = [i for i in sorted(items, key=lambda i: (i.date, i.id)) if i.kind in ("conversation", "trajectory")]
    for item in conversations:
        for st in conversation_statements(item, user_speakers, name, withheld):
            draft.add(st)
    if conversations:
        draft.profile()  # every user has a profile, even an empty one
        draft.rename()
    return Plan(draft.writes(), draft.claims, draft.closed, tuple(i.id for i in items))


class _MemoryDraft:
    """The pages of one user's memory while a plan fills them: each loaded on first use (a
    hand-written page at the same path is left alone: the draft writes ``<slug>-memory``)."""

    def __init__(self, user: str, name: str, read: ReadPage) -> None:
        self.folder = f"users/{user}"
        self.scope = f"user:{user}"
        self.name = name
        self.read = read
        self.pages: dict[str, MemoryPage] = {}
        self.claims = 0
        self.closed = 0
        self.known = {kind: self._known(kind) for kind in ENTITY_KINDS}

    def _known(self, kind: str) -> list[str]:
        """The things of a kind already on its page (their cards), so later mentions find them."""
        path = f"{self.folder}/{kind}.md"
        text = self.read(path)
        if not text or not is_generated(text, path):
            return []
        prefix = f"{ENTITY_SINGULAR[kind]}:"
        return [str(f.get("value")) for f in load_memory_page(text, path).facts if str(f.get("key", "")).startswith(prefix)]

    def page(self, slug: str, title: str, kind: str) -> MemoryPage:
        path = f"{self.folder}/{slug}.md"
        if path not in self.pages:
            text = self.read(path)
            if text is not None and is_generated(text, path):
                self.pages[path] = load_memory_page(text, path)
                self.pages[path].title = title  # the user's name now (--reprocess under another speaker)
            elif text is not None:
                return self.page(f"{slug}-memory", title, kind)
            else:
                self.pages[path] = MemoryPage(path, title, kind, self.scope)
        return self.pages[path]

    def profile(self) -> MemoryPage:
        return self.page("profile", f"{self.name}'s profile", "profile")

    def titles(self) -> dict[str, str]:
        """Every page this draft may write: slug -> title."""
        out = {"profile": f"{self.name}'s profile", "timeline": f"{self.name}'s timeline", "notes": f"{self.name}: other facts"}
        out |= {slug: f"{self.name}: {title.lower()}" for slug, title, _ in TOPICS}
        out |= {kind: f"{self.name}: {what}" for kind, what in ENTITY_KINDS.items()}
        return out

    def rename(self) -> None:
        """The pages of this user written under another name (``kb memory ingest --reprocess``
        with a corrected speaker) renamed: each such page is rendered again under this name."""
        for slug, title in self.titles().items():
            for path in (f"{self.folder}/{slug}.md", f"{self.folder}/{slug}-memory.md"):
                text = self.read(path)
                if path not in self.pages and text is not None and is_generated(text, path) and parse_page(text, path).title != title:
                    self.pages[path] = load_memory_page(text, path)
                    self.pages[path].title = title

    def add(self, st: Statement) -> None:
        """File one statement: an instruction or attributes on the profile, the things it names
        on their pages, anything else on a topic page; a dated event on the timeline too."""
        if st.instruction:
            self._add_instruction(st)
            return
        attributes = attributes_of(st)
        things = entities_of_text(st.quote, self.known)
        if attributes:
            self._add_attributes(st, attributes)
        for kind, thing in things:
            self._add_thing(st, kind, thing)
        if things:
            return
        if not attributes:
            self._add_topic(st)
        if st.date and (st.note or TIMELINE_RE.search(st.quote)):
            timeline = self.page("timeline", f"{self.name}'s timeline", "timeline")
            if not timeline.has_label(label_for(st)):
                timeline.sections.setdefault(st.date, []).append(_entry(st))
                timeline.sources.add(st.evidence_id)

    def _add_instruction(self, st: Statement) -> None:
        label = label_for(st)
        profile = self.profile()
        if profile.has_label(label):
            return
        # who gave it and when stay with it; newest first, so the latest valid
        # instruction reads before the ones it may reverse
        entry = Entry(f'Instruction from {st.speaker}: "{st.quote}"[^{label}] _(given {st.date})_', label, citation_line(st))
        profile.sections.setdefault("Instructions", []).insert(0, entry)
        profile.facts.append(
            {
                "key": "instruction",
                "value": st.quote,
                "about": self.name,
                "relation": "instruction",
                "learned": f"given by {st.speaker} on {st.date}",
                "valid_from": st.date,
                "source": _source(st),
                "label": label,
            }
        )
        profile.sources.add(st.evidence_id)
        self.claims += 1

    def _add_attributes(self, st: Statement, attributes: list[Attribute]) -> None:
        """The statement once on the profile (under its first attribute's section), a card for
        each attribute; a new value of a single attribute closes the values it replaces."""
        label = label_for(st)
        profile = self.profile()
        if profile.has_label(label):
            return
        cards = [self._card(profile, st, attr) for attr in attributes]
        if not any(cards):
            return  # every value is known and current already
        profile.sections.setdefault(profile_section(attributes[0].key), []).append(_entry(st))
        profile.sources.add(st.evidence_id)
        self.claims += 1

    def _card(self, profile: MemoryPage, st: Statement, attr: Attribute) -> bool:
        current = [f for f in profile.facts if f.get("key") == attr.key and not f.get("valid_to")]
        if any(str(f.get("value", "")).lower() == attr.value.lower() for f in current):
            return False
        for fact in current:
            fact["valid_to"] = st.date
            self.closed += 1
            _close_entry(profile, str(fact.get("label", "")), st.date)
            # other cards read from the same statement ("I prefer aisle seats": seat and a
            # preference) no longer hold either once that statement is closed
            for other in profile.facts:
                if other is not fact and not other.get("valid_to") and other.get("label") and other.get("label") == fact.get("label"):
                    other["valid_to"] = st.date
        base = attr.key.split(":")[0]
        said = f"said by {st.speaker} on {st.date}" if st.date else f"said by {st.speaker}"
        if attr.previous and not current:  # "I moved from Denver to Leeds": Denver was home until then
            profile.facts.append(
                {
                    "key": attr.key,
                    "value": attr.previous,
                    "about": self.name,
                    "relation": "self",
                    "learned": said,
                    "valid_to": st.date,
                    "source": _source(st),
                }
            )
            self.closed += 1
        card = {
            "key": attr.key,
            "value": attr.value,
            "about": self.name if base in SELF_KEYS else attr.value,
            "relation": "self"
            if base in SELF_KEYS
            else (attr.detail if base in ("family", "child", "pet") and attr.detail else attr.value if base == "died" else base),
            "detail": attr.detail if base in ("died", "favorite") and attr.detail else None,
            "learned": said,
            "valid_from": st.date,
            "valid_to": None,
            "when": st.note or None,
            "source": _source(st),
            "label": label_for(st),
        }
        profile.facts.append(card)
        return True

    def _add_thing(self, st: Statement, kind: str, thing: str) -> None:
        """A statement about one thing the user owns or deals with, in that thing's section of
        its kind's page, with a card per thing (its details: numbers, amounts, dates said)."""
        page = self.page(kind, f"{self.name}: {ENTITY_KINDS[kind]}", "topic")
        label = label_for(st)
        section = page.sections.setdefault(thing, [])
        if any(e.label == label for e in section):
            return
        key = f"{ENTITY_SINGULAR[kind]}:{slugify(thing)}"
        card = next((f for f in page.facts if f.get("key") == key), None)
        if card is None:
            card = {
                "key": key,
                "value": thing,
                "about": thing,
                "relation": f"{self.name}'s {ENTITY_SINGULAR[kind]}",
                "learned": f"first mentioned by {st.speaker} on {st.date}",
                "valid_from": st.date,
                "source": _source(st),
            }
            page.facts.append(card)
        details = [d for d in entity_details(st.quote) if thing.lower() not in d.lower() or len(d) > len(thing) + 3]
        known = {str(d.get("text")) for d in card.get("details") or [] if isinstance(d, dict)}
        new = [{"text": d, "said": st.date, "source": _source(st)} for d in details if d not in known]
        if new:
            card["details"] = list(card.get("details") or []) + new
        section.append(_entry(st))
        page.sources.add(st.evidence_id)
        self.claims += 1

    def _add_topic(self, st: Statement) -> None:
        """A statement on the page of what it is about."""
        slug, title = topic_of(st)
        page_title = f"{self.name}: other facts" if slug == "notes" else f"{self.name}: {title.lower()}"
        topic = self.page(slug, page_title, "topic")
        label = label_for(st)
        if topic.has_label(label):
            return
        topic.sections.setdefault(title, []).append(_entry(st))
        topic.sources.add(st.evidence_id)
        self.claims += 1

    def writes(self) -> dict[str, str]:
        """Every touched page rendered, and the folder index listing them."""
        writes: dict[str, str] = {}
        index_path = f"{self.folder}/index.md"
        index_text = self.read(index_path) or new_index(
            self.folder, f"{self.name}'s memory", f"What {self.name} has told us, with sources.", self.scope
        )
        index_text = _renamed_index(index_text, index_path, self.name)
        for path, memory in sorted(self.pages.items()):
            if memory.type == "timeline":
                memory.sections = dict(sorted(memory.sections.items(), reverse=True))
            if memory.type == "profile":
                order = ["Instructions", *SECTIONS]
                memory.sections = dict(
                    sorted(
                        memory.sections.items(), key=lambda kv: (kv[0] == "History", order.index(kv[0]) if kv[0] in order else len(order))
                    )
                )
            summary = _page_summary(memory, self.name)
            writes[path] = render_memory_page(memory, summary)
            index_text = upsert_index_entry(index_text, index_path, page_id_for_path(path), summary)
        if self.pages:
            writes[index_path] = index_text
        return writes


ENTITY_SINGULAR = {
    "vehicles": "vehicle",
    "cards": "card",
    "accounts": "account",
    "policies": "policy",
    "warranties": "warranty",
    "devices": "device",
    "doctors": "doctor",
}
# A dated statement that reads as an event or a plan goes on the timeline too.
TIMELINE_RE = re.compile(
    r"\b(?:went|visited|moved|bought|started|finished|met|joined|attended|ago|last|yesterday|will|plan|planning|going to|next|passed away|died|married)\b",
    re.I,
)


def _renamed_index(text: str, path: str, name: str) -> str:
    """The folder index this proposer made (``<name>'s memory``) under the user's name now."""
    page = parse_page(text, path)
    old = str(page.meta.get("title", ""))
    m = re.fullmatch(r"(.+)'s memory", old)
    if not m or m.group(1) == name:
        return text
    meta = dict(page.meta, title=f"{name}'s memory")
    if str(meta.get("summary", "")) == f"What {m.group(1)} has told us, with sources.":
        meta["summary"] = f"What {name} has told us, with sources."
    body = page.body.replace(f"# {old}", f"# {name}'s memory", 1).replace(
        f"What {m.group(1)} has told us, with sources.", str(meta["summary"]), 1
    )
    return render_page(meta, body)


def _close_entry(profile: MemoryPage, label: str, until: str) -> None:
    for section, entries in profile.sections.items():
        if section == "History":
            continue
        for entry in list(entries):
            if entry.label == label:
                entries.remove(entry)
                entry.line = f"{entry.line} _(no longer current since {until}; see the newer entry)_"
                profile.sections.setdefault("History", []).append(entry)
                return


def _page_summary(memory: MemoryPage, name: str) -> str:
    if memory.type == "profile":
        order = list(SECTIONS)
        current = [
            f for f in memory.facts if not f.get("valid_to") and f.get("key") != "instruction" and not unsafe_statement(str(f["value"]))
        ]
        current.sort(key=lambda f: order.index(profile_section(str(f["key"]))) if profile_section(str(f["key"])) in order else len(order))
        parts = [
            f"{ATTRIBUTE_LABELS.get(str(f['key']).split(':')[0], f['key'])}: {f['value']}"
            for f in current
            if not str(f["key"]).startswith("plan")
        ]
        return _summary(f"{name}: " + "; ".join(parts) + ".") if parts else _summary(f"No stable facts about {name} are recorded yet.")
    count = sum(len(v) for k, v in memory.sections.items() if k != "History")
    kind = next((k for k, one in ENTITY_SINGULAR.items() if any(str(f.get("key", "")).startswith(f"{one}:") for f in memory.facts)), None)
    if kind is not None:
        things = [str(f["value"]) for f in memory.facts if str(f.get("key", "")).startswith(f"{ENTITY_SINGULAR[kind]}:")]
        return _summary(f"{name}'s {ENTITY_KINDS[kind]} ({len(things)}): " + "; ".join(things) + f". {count} statements.")
    if memory.type == "timeline":
        return _summary(f"Dated events and plans from {name}'s conversations, newest first ({count} entries).")
    return _summary(f"What {name} said about {memory.title.split(': ', 1)[-1]} ({count} statements).")


__all__ = ["GENERATED_TAG", "Plan", "plan_documents", "plan_user_memory", "upsert_index_entry", "new_index"]


# ---- the Proposer protocol ---------------------------------------------------------------------

OFFLINE_PROPOSER = AgentIdentity("kb-offline/extractive", "kb-extractive")


def user_name(user: str, speakers: tuple[str, ...]) -> str:
    """How claims name the user: the speaker name their conversations use, else one made from
    the id."""
    named = [s for s in speakers if s.lower() not in ("user", "human")]
    return named[0] if named else display_name(user)


def plan_task(task: ProposalTask, read: ReadPage, withheld: Withheld = keep_all) -> list[Plan]:
    """The pages to write for a task: one plan for shared documents, one per user; no sentence
    that ``withheld`` keeps out of pages."""
    plans = []
    system = [i for i in task.evidence if i.scope == SYSTEM]
    documents = [i for i in system if i.kind == "document"]
    others = [i for i in system if i.kind != "document"]
    written: dict[str, str] = {}
    if documents:  # one faithful page per source file (agents.offline.document_plan)
        done = plan_document_pages(documents, read, written, withheld)
        plans.append(Plan(dict(written), done.claims, done.closed, tuple(i.id for i in documents)))
    if others:
        plans.append(plan_documents(others, lambda path: written.get(path) or read(path), withheld))
    for user in sorted({u for i in task.evidence if (u := user_of(i.scope))}):
        mine = [i for i in task.evidence if i.scope == f"user:{user}"]
        speakers = task.user_speakers.get(user, ())
        plans.append(plan_user_memory(user, mine, read, user_name(user, speakers), set(speakers), withheld))
    return plans


class OfflineProposer:
    """The built-in extractive Proposer (no model). A revision cannot rewrite a claim: it
    withdraws what the review flagged (``agents.offline.revision``)."""

    identity = OFFLINE_PROPOSER

    def __init__(self, privacy: Privacy | None = None) -> None:
        privacy = privacy or Privacy()
        kinds, allow = privacy.kinds("mask", "no-copy"), privacy.allow
        # a sentence with a masked value's placeholder ("my card is [CARD-1]") says nothing to remember
        self.withheld: Withheld = lambda sentence: bool(PLACEHOLDER_RE.search(sentence)) or holds(sentence, kinds, allow)

    def propose(self, task: ProposalTask, backend: WriteBackend) -> ProposerOutcome:
        if task.is_revision:
            withdrawal = withdraw_flagged(backend, task.comments)
            audit: dict[str, object] = {
                "agent": self.identity.model,
                "withdrawn": withdrawal.withdrawn,
                "kept": withdrawal.kept,
                "notes": list(withdrawal.notes),
            }
            return ProposerOutcome(transcript=audit, withdrawal=withdrawal)
        claims = closed = 0
        for plan in plan_task(task, backend.page_text, self.withheld):
            for path, text in sorted(plan.writes.items()):
                backend.write_page(path, text)
            claims += plan.claims
            closed += plan.closed
        record = {"agent": self.identity.model, "evidence": [i.id for i in task.evidence], "claims": claims, "closed": closed}
        return ProposerOutcome(claims, closed, transcript=record)
