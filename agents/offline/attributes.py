"""Profile attributes of a user's own sentence, without a model: where they live and come from,
work, family, pets, health, preferences, hobbies, plans; and how each reads on the profile.

Everything here reads one sentence. Values are verbatim parts of it (so a fact card's value is
on its cited line); nothing is inferred or guessed. The word lists (``PARTNER_WORDS``,
``FAMILY_WORDS``, ``PET_WORDS``, ``ACTIVITY_WORDS``) are shared with ``profile`` (topics and
sentences without "I").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kb.markdown import slugify


@dataclass(frozen=True)
class Attribute:
    key: str
    value: str
    single: bool = True  # a new value closes the old one
    detail: str = ""  # a qualifier said with it ("passed away", "late")
    previous: str = ""  # an older value the same sentence says is over ("moved from Denver")


# ---- attributes --------------------------------------------------------------------------

_NAME = r"[A-Z][\w'’\-]+(?: [A-Z][\w'’\-]+)?"
_NAMES = rf"{_NAME}(?:(?:,| and|, and|,? &) {_NAME})*"
_PLACE = r"[A-Z][\w\-.'’]*(?:(?:,? )[A-Z][\w\-'’]*)*"
_ORG = r"[A-Z][\w&'’.\-]*(?: (?:[A-Z&][\w&'’.\-]*|of|de|and))*(?<![ .])"
_STOP = r"(?:at|for|with|in|on|and|but|since|because|so|now|who|which|that|to|from|when|while|as|or|every|each|last|this|next|yesterday|today|tomorrow|recently|again|too|already|anymore)\b"
_WORDS = rf"(?:(?!{_STOP})[a-z][\w\-]*)(?: (?!{_STOP})[a-z][\w\-]*){{0,3}}"
_JOBS = (
    "nurse|teacher|engineer|developer|programmer|doctor|physician|surgeon|dentist|lawyer|attorney|accountant|architect|"
    "designer|artist|painter|writer|author|journalist|photographer|musician|singer|chef|cook|baker|barista|waiter|waitress|"
    "pilot|firefighter|police officer|officer|soldier|scientist|researcher|professor|lecturer|student|consultant|analyst|"
    "manager|director|ceo|founder|entrepreneur|instructor|coach|trainer|therapist|counselor|counsellor|psychologist|"
    "social worker|pharmacist|veterinarian|vet|electrician|plumber|carpenter|mechanic|driver|farmer|librarian|"
    "paramedic|midwife|caregiver|realtor|agent|banker|editor|producer|actor|actress|dancer|athlete|player|volunteer|"
    "retiree|freelancer|translator|tutor|secretary|receptionist|cashier|clerk|technician|scientist"
)
PARTNER_WORDS = r"wife|husband|partner|spouse|boyfriend|girlfriend|fianc[ée]e?"
FAMILY_WORDS = (
    r"mom|mother|mum|dad|father|parents|brother|sister|siblings|grandma|grandmother|grandpa|grandfather|grandparents|"
    r"aunt|uncle|cousin|niece|nephew|stepdad|stepmom|stepfather|stepmother|mother-in-law|father-in-law|in-laws|"
    r"best friend|friend|daughter|son|kids|children|child|baby|twins|grandson|granddaughter|grandkids|grandchildren"
)
PET_WORDS = r"cats?|dogs?|pupp(?:y|ies)|pups?|kittens?|kitty|bunn(?:y|ies)|rabbits?|hamsters?|parrots?|birds?|fish|turtles?|horses?|guinea pigs?|snakes?|lizards?"
_COUNT = r"(?:an?|another|one|two|three|four|five|six|\d+)"
_INSTRUMENTS = (
    r"violin|guitar|piano|drums|cello|flute|saxophone|sax|trumpet|ukulele|bass|harp|clarinet|keyboard|"
    r"tennis|soccer|football|basketball|golf|chess|volleyball|baseball|hockey|badminton|rugby|cricket|pickleball|video games|board games"
)
ACTIVITY_WORDS = (
    r"hiking|swimming|running|jogging|camping|fishing|surfing|skiing|snowboarding|climbing|biking|cycling|kayaking|dancing|bowling|sailing"
)
_CONDITIONS = (
    r"asthma|diabetes|type 1 diabetes|type 2 diabetes|arthritis|migraines?|eczema|celiac disease|high blood pressure|"
    r"hypertension|anxiety|depression|adhd|insomnia|epilepsy|a bad back|back pain|a heart condition|cancer|long covid"
)

# (key, pattern, single): the value is the pattern's group "v" (a list of names is split into one
# attribute each); "prev" is an older value the sentence closes, "detail" a qualifier.
ATTRIBUTE_RULES: list[tuple[str, re.Pattern[str], bool]] = [
    (
        "home",
        re.compile(
            rf"(?i:\b(?:I|we)(?:'ve| have)? (?:just |recently |finally |also )?(?:moved|relocated)) from (?P<prev>{_PLACE}) to (?P<v>{_PLACE})"
        ),
        True,
    ),
    (
        "home",
        re.compile(
            rf"(?i:\b(?:I|we) (?:now |currently |still )?(?:live in|am living in|are living in|reside in)|\bI'm living in|\bwe're living in|"
            rf"\b(?:I|we)(?:'ve| have)? (?:just |recently |finally |also )?(?:moved|relocated) (?:back )?to|\bI(?:'m| am) based in|"
            rf"\bmy home is in)\s+(?P<v>{_PLACE})"
        ),
        True,
    ),
    ("address", re.compile(r"\bI live at\s+(?P<v>.+?)(?:[.]|$)"), True),
    (
        "origin",
        re.compile(
            rf"(?i:\bI(?:'m| am| was) originally from|\bI(?:'m| am) from|\bI grew up in|\bmy home (?:country|town|city),?)\s+(?P<v>{_PLACE})"
        ),
        True,
    ),
    ("born", re.compile(rf"(?i:\bI was born (?:in|on))\s+(?P<v>{_PLACE}|(?:19|20)\d\d)"), True),
    (
        "birthday",
        re.compile(
            r"(?i:\bmy birthday is(?: on)?)\s+(?P<v>[A-Z][a-z]+ \d{1,2}(?:st|nd|rd|th)?|\d{1,2}(?:st|nd|rd|th)? (?:of )?[A-Z][a-z]+)"
        ),
        True,
    ),
    ("seat", re.compile(r"\bI (?:now )?prefer (?P<v>aisle|window|middle) seats?", re.I), True),
    (
        "diet",
        re.compile(r"\bI(?:'m| am) (?:a )?(?P<v>vegetarian|vegan|pescatarian|gluten-free|lactose intolerant|kosher|halal)\b", re.I),
        True,
    ),
    (
        "occupation",
        re.compile(
            rf"(?i:\bI(?:'m| am)?(?: now| currently)? (?:employed (?:full-time |part-time )?|working |work |worked )as)\s+(?:an? )?(?P<v>{_WORDS})"
            rf"(?: (?:at|for|with) (?P<org>{_ORG}))?"
        ),
        True,
    ),
    (
        "occupation",
        re.compile(
            rf"(?i:\bI(?:'m| am)(?: now| currently)? (?:an?|the))\s+(?P<v>(?:[a-z\-]+ ){{0,2}}(?:{_JOBS}))\b(?: (?:at|for|with) (?P<org>{_ORG}))?"
        ),
        True,
    ),
    (
        "occupation",
        re.compile(rf"(?i:\bI(?:'m| am|'ve been| have been)? (?:now |currently |still )?)(?P<v>(?:teach|teaching) {_WORDS})"),
        True,
    ),
    ("occupation", re.compile(r"(?i:\bI(?:'m| am)? (?:now |recently |just )?)(?P<v>retired)\b"), True),
    (
        "employer",
        re.compile(
            rf"(?i:\bI(?:'m| am)? (?:now |currently |still )?(?:work|working|worked) (?:at|for)|\bI (?:just )?(?:got a job|started (?:a new job|working)) (?:at|with|for)|"
            rf"\bI(?:'ve| have) been working (?:at|for))\s+(?P<v>{_ORG})"
        ),
        True,
    ),
    (
        # "my new job at the bakery" (not "lost my job at ...": that is a former job)
        "employer",
        re.compile(
            rf"(?i:(?<!lost )(?<!quit )(?<!left )(?<!old )\bmy (?:new |current |dream |first |part-time |full-time )?job (?:as (?:an? )?[a-z]+(?: [a-z]+)? )?at)\s+"
            rf"(?P<v>{_ORG}|the (?!moment\b|weekend\b|end\b|same\b)[a-z]+(?: (?!{_STOP})[a-z]+)?)"
        ),
        True,
    ),
    (
        "business",
        re.compile(
            r"(?i:\bI (?:run|own|opened|started|launched))\s+(?P<v>(?:a|an|my own|my)\s+(?:[a-z\-]+\s){0,2}"
            r"(?:business|studio|shop|store|restaurant|bakery|cafe|café|company|startup|gym|clinic|salon|practice|farm|blog|channel|band|podcast))\b"
        ),
        False,
    ),
    (
        "study",
        re.compile(rf"(?i:\bI(?:'m| am) (?:studying|majoring in|doing a degree in|a student at)|\bI study)\s+(?P<v>{_ORG}|{_WORDS})"),
        True,
    ),
    ("name", re.compile(r"(?i:\bmy (?:full )?name is)\s+(?P<v>[A-Z][\w'\-]+(?: [A-Z][\w'\-]+)*)"), True),
    ("phone", re.compile(r"\b(?:my (?:cell|phone|mobile)(?: number)? is)\s+(?P<v>[+\d][\d\- ()]{6,}\d)", re.I), True),
    ("email", re.compile(r"\b(?P<v>[\w.+-]+@[\w-]+\.[\w.]+)"), True),
    ("manager", re.compile(r"(?i:\bmy (?:manager|boss) is)\s+(?P<v>[A-Z][\w'\-]+(?: [A-Z][\w'\-]+)*)"), True),
    ("partner", re.compile(rf"(?i:\bmy (?:{PARTNER_WORDS})(?:'s name)?(?: is|,)?)\s+(?P<v>{_NAME})(?!')"), True),
    (
        "died",
        re.compile(
            rf"(?i:\bmy late (?P<rel>{FAMILY_WORDS}|{PARTNER_WORDS}))\b|(?i:\bmy (?P<rel2>{FAMILY_WORDS}|{PARTNER_WORDS})(?:,? {_NAME},?)? (?P<detail>passed away|died|passed))\b"
            rf"|(?i:\b(?P<detail2>lost) my (?P<rel3>{FAMILY_WORDS}|{PARTNER_WORDS}))\b"
        ),
        False,
    ),
    ("child", re.compile(rf"(?i:\bmy (?:daughter|son|kid|child|baby)(?:'s name)?(?: is|,)?)\s+(?P<v>{_NAME})(?!')"), False),
    ("family", re.compile(rf"(?i:\bmy (?P<rel>{FAMILY_WORDS})(?:'s name is|,| named| called)?)\s+(?P<v>{_NAMES})(?!')"), False),
    ("family", re.compile(rf"(?i:\bmy (?:{_COUNT} )?)(?P<v>{PARTNER_WORDS}|{FAMILY_WORDS})\b(?!-)"), False),
    ("pet", re.compile(rf"(?i:\bmy (?:{_COUNT} )?(?P<rel>{PET_WORDS})(?:'s name is|,| named| called)?)\s+(?P<v>{_NAMES})(?!')"), False),
    (
        "pet",
        re.compile(
            rf"(?i:\b(?:I|we) (?:have|got|adopted|own) )(?P<v>{_COUNT} (?:[a-z]+ )?(?:{PET_WORDS}))\b(?:,? (?:named|called) (?P<names>{_NAMES}))?"
        ),
        False,
    ),
    # "my horse painting" is a painting
    (
        "pet",
        re.compile(
            rf"(?i:\bmy )(?P<v>{PET_WORDS})\b(?!-)(?! (?i:painting|drawing|picture|photo|sculpture|toy|food|treat|costume|shirt|mug|print)s?\b)"
        ),
        False,
    ),
    (
        "allergy",
        re.compile(r"(?i:\bI(?:'m| am) (?:severely |very |really )?allergic to)\s+(?P<v>[\w\-, ]+?)(?=[.;!]|,? but |,? so |$)"),
        False,
    ),
    ("allergy", re.compile(r"(?i:\bI have an?)\s+(?P<v>[\w\-]+(?: [\w\-]+)?) allergy\b"), False),
    (
        "condition",
        re.compile(rf"(?i:\bI (?:have|suffer from|was diagnosed with|live with|got diagnosed with))\s+(?P<v>{_CONDITIONS})\b"),
        False,
    ),
    ("condition", re.compile(r"(?i:\bI(?:'m| am) )(?P<v>pregnant|diabetic|asthmatic|deaf|blind|colou?r-?blind)\b"), True),
    ("medication", re.compile(r"(?i:\bI take)\s+(?P<v>[A-Za-z][\w\-]+(?: \d+ ?mg)?)\s+(?:for|every|daily|each|twice|once)\b"), False),
    (
        "favorite",
        re.compile(
            r"(?i:\bmy (?:all-time )?favou?rite (?P<what>[a-z]+(?: [a-z]+)?) (?:is|are))\s+(?P<v>[^,.;!?]{2,40}?)(?=[,.;!?]| because| and|$)"
        ),
        False,
    ),
    (
        "preference",
        re.compile(r"(?i:\bI (?:really |much |generally )?prefer)\s+(?P<v>[^,.;!?]{2,40}?)(?=[,.;!?]| over | to | because|$)"),
        False,
    ),
    (
        "dislike",
        re.compile(
            r"(?i:\bI (?:really )?(?:hate|can't stand|cannot stand|dislike|don't like|do not like|don't eat|do not eat))\s+(?P<v>[^,.;!?]{2,40}?)(?=[,.;!?]| because| and| but|$)"
        ),
        False,
    ),
    (
        "hobby",
        re.compile(
            rf"(?i:\bI (?:play|played|am playing|'m playing|practice|practise)|\bI(?:'m| am) learning(?: to play)?|\bplaying my)\s+(?P<v>(?:the )?(?:{_INSTRUMENTS}))\b"
        ),
        False,
    ),
    (
        "hobby",
        re.compile(
            rf"(?i:\bI (?:really |also |just |absolutely |totally )?(?:love|loved|enjoy|enjoyed|like|adore)|\bI (?:often |usually |regularly )?go)\s+(?P<v>(?:(?:{ACTIVITY_WORDS}|(?!being an?\b)[a-z]+ing)(?! (?:my|our|his|her|their)\b)(?: (?!{_STOP})[a-z]+){{0,2}}))\b"
        ),
        False,
    ),
    # "I painted that lake sunrise": the craft, as its verb's stem (a verbatim part of the sentence)
    (
        "hobby",
        re.compile(
            r"(?i:\b(?:I|we) (?:also |still |just |recently |sometimes |often )?)(?P<v>paint|draw|sketch|sculpt|knit|crochet|sew)(?:ed|s)?\b"
        ),
        False,
    ),
    (
        "hobby",
        re.compile(
            r"(?i:\bmy (?:favou?rite )?(?:hobby is|hobbies are|passion is)|\bI(?:'m| am) (?:really )?into|\bI(?:'ve| have)? (?:recently )?took up|\bI(?:'ve| have) taken up)\s+(?P<v>[^,.;!?]{2,40}?)(?=[,.;!?]| and | but |$)"
        ),
        False,
    ),
    (
        "interest",
        re.compile(
            r"(?i:\bI(?:'m| am) (?:really |so |super |very |also )?(?:keen on|interested in|passionate about))\s+(?P<v>[^,.;!?]{2,40}?)(?=[,.;!?]| and | but | because| so |$)"
        ),
        False,
    ),
    (
        "former-job",
        re.compile(rf"(?i:(?:\bI (?:also |just )?|^)(?:lost|quit|left) my job) (?:as (?:an? )?(?P<v>{_WORDS})|at (?P<v2>{_ORG}))"),
        False,
    ),
    (
        "visited",
        re.compile(
            rf"(?i:\b(?:I|we)(?:'ve| have) (?:been|traveled|travelled) to|\b(?:I|we) (?:just |recently |finally )?(?:visited|went to|traveled to|travelled to|"
            rf"got back from|came back from|returned from)|\b(?:I|we) (?:just |recently )?(?:took|made|went on|had) an? (?:[a-z]+ ){{0,2}}trip"
            rf"(?: (?:last|this|over the) [a-z]+)? to)\s+(?P<v>{_PLACE})"
        ),
        False,
    ),
    (
        "plan",
        re.compile(
            r"(?i:\b(?:I|we)(?:'m| am|'re| are) (?:planning|hoping|about|aiming) to|\b(?:I|we) (?:plan|intend|hope) to|"
            r"\b(?:I|we)(?:'m| am|'re| are) (?:getting married|getting ready for|moving|starting(?! to (?:realize|realise|feel|think|see|understand|get|believe|wonder|notice|learn)\b)|visiting|flying|traveling|travelling))\s*(?P<v>[^,;!?]{3,70}?)"
            r"(?=[,;!?]|\.(?:\s|$)| because| 'cause| cause| so | and I\b| but |$)"
        ),
        False,
    ),
    (
        # something under way: "I'm researching adoption agencies", "I'm saving up for a house"
        "plan",
        re.compile(
            r"(?i:\b(?:I|we)(?:'m| am|'re| are) (?:now |currently |also |still |just )?)(?P<v>(?:researching|looking into|saving (?:up )?for|"
            r"training for|applying (?:for|to)) [^,;!?]{3,60}?)(?=[,;!?]|\.(?:\s|$)| [-–—] | because| so | and I\b| but |$)"
        ),
        False,
    ),
    (
        # "I'm going to" / "gonna" is a plan only with a when or a where ("gonna make it" is not)
        "plan",
        re.compile(
            r"(?i:\b(?:I|we)(?:'m| am|'re| are) (?:going to|gonna|going))\s*(?P<v>[^,;!?]{0,50}?\b(?:(?:next|this) (?:week|weekend|month|year|summer|winter|spring|fall)|"
            r"tomorrow|tonight|soon|in (?-i:[A-Z])\w+|to (?-i:[A-Z])\w+|on (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)))\b"
        ),
        False,
    ),
]

# how each key reads on the profile, and under which section
ATTRIBUTE_LABELS = {
    "name": "name",
    "home": "home city",
    "address": "address",
    "origin": "from",
    "born": "born",
    "birthday": "birthday",
    "occupation": "occupation",
    "employer": "employer",
    "business": "business",
    "study": "studies",
    "work": "work",
    "phone": "phone",
    "email": "email",
    "seat": "seat preference",
    "diet": "diet",
    "manager": "manager",
    "partner": "partner",
    "child": "child",
    "family": "family",
    "died": "deceased",
    "pet": "pet",
    "allergy": "allergy",
    "condition": "health",
    "medication": "medication",
    "favorite": "favourite",
    "preference": "prefers",
    "dislike": "dislikes",
    "hobby": "hobby",
    "plan": "plan",
    "interest": "interested in",
    "former-job": "former job",
    "visited": "has been to",
}
SECTIONS = {
    "Identity": {"name", "home", "address", "origin", "born", "birthday", "phone", "email"},
    "Work and studies": {"occupation", "employer", "business", "study", "work", "manager", "former-job"},
    "People": {"partner", "child", "family", "died"},
    "Pets": {"pet"},
    "Health": {"allergy", "condition", "medication"},
    "Preferences": {"seat", "diet", "favorite", "preference", "dislike"},
    "Hobbies": {"hobby", "interest"},
    "Travel": {"visited"},
    "Plans": {"plan"},
}
SELF_KEYS = (
    SECTIONS["Identity"]
    | SECTIONS["Work and studies"] - {"manager"}
    | SECTIONS["Health"]
    | SECTIONS["Preferences"]
    | {"hobby", "plan", "interest", "visited", "former-job"}
)


def profile_section(key: str) -> str:
    base = key.split(":")[0]
    return next((name for name, keys in SECTIONS.items() if base in keys), "People")


def _split_names(value: str) -> list[str]:
    return [v.strip() for v in re.split(r",? and |, |,? & ", value) if v.strip()]


def clean_value(value: str) -> str:
    return value.strip().rstrip(".,;:!").strip()


_NOT_VALUES = {"i", "a", "an", "the", "my", "it", "this", "that", "them", "these", "those", "everything", "something", "anything", "things"}

# ---- a value names a thing ------------------------------------------------------------------

# A hobby, an interest, a dislike or a preference is a noun phrase that names a thing ("pottery",
# "playing the violin", "charity work"), not what a phrase cut at a stop word leaves ("being",
# "having some of", "seeing them eat"). These are function words and light verbs: they
# name no pastime of their own, whoever says them.
_FUNCTION_WORDS = {
    "a", "an", "the", "my", "our", "your", "his", "her", "their", "its", "some", "any", "all", "many", "much", "more", "most",
    "of", "in", "on", "at", "to", "into", "onto", "about", "around", "up", "out", "off", "over", "with", "by", "for", "from",
    "and", "or", "but", "so", "different", "other", "same", "such", "new", "own", "very", "really", "just", "this", "that",
}  # fmt: skip
_PRONOUNS = {"it", "them", "him", "her", "me", "us", "you", "i", "i'm", "myself", "themselves", "something", "anything", "everything", "nothing", "someone", "stuff", "things"}  # fmt: skip
_COPULAS = {"being", "getting", "not", "becoming", "feeling"}  # a state, not a pastime: "being around friends"
# verbs too general to name a pastime without a telling object: "playing", "spending time"
_LIGHT_VERBS = {
    "having", "doing", "going", "making", "taking", "seeing", "watching", "playing", "holding", "spending", "keeping", "giving",
    "putting", "trying", "using", "letting", "talking", "curling", "sinking", "breaking", "escaping", "finding", "looking", "coming",
}  # fmt: skip
_GENERIC_NOUNS = {"time", "lot", "fun", "part", "care", "lessons", "place", "way", "one", "ones", "thing", "stuff"}
# a relation word that alone says nothing about the user: everyone has friends
_GENERIC_RELATIONS = {"friend", "friends", "best friend"}
_THING_KEYS = {"hobby", "interest", "dislike", "preference"}


def names_a_thing(key: str, value: str) -> bool:
    """Whether ``value`` can stand as the ``key`` of a profile: a hobby, an interest, a dislike or
    a preference is a noun phrase naming a thing (not a copula, not a light verb without a telling
    object, no pronoun, not cut after a function word); a relation without a name is a specific one
    ("sister", not "friend")."""
    base = key.split(":")[0]
    words = value.lower().split()
    if not words:
        return False
    if base == "family":
        return value.lower() not in _GENERIC_RELATIONS
    if base not in _THING_KEYS:
        return True
    if not re.match(r"[a-z]", words[0]) or words[0] in _COPULAS or words[-1] in _FUNCTION_WORDS:
        return False
    if any(w in _PRONOUNS for w in words):
        return False
    rest = [w for w in words[1:] if w not in _FUNCTION_WORDS]
    return not (words[0] in _LIGHT_VERBS and (not rest or all(w in _GENERIC_NOUNS for w in rest)))


def _read(key: str, single: bool, groups: dict[str, str | None]) -> list[Attribute]:
    """The attributes of one rule's match (a list of names gives one each)."""
    value = groups.get("v") or groups.get("v2") or ""
    if key == "died":
        rel = groups.get("rel") or groups.get("rel2") or groups.get("rel3") or ""
        detail = "late" if groups.get("rel") else groups.get("detail") or groups.get("detail2") or ""
        return [Attribute(f"died:{rel.lower()}", rel, False, detail)]
    if key == "allergy":
        return [Attribute(f"allergy:{slugify(one)[:40]}", one, False) for one in _split_names(value)]
    if key in ("family", "pet", "child") and groups.get("rel") and re.match(_NAME, value):
        rel = str(groups["rel"]).lower()
        return [Attribute(f"{key}:{name.lower()}", name, False, rel) for name in _split_names(value)]
    if key == "pet" and groups.get("names"):
        return [Attribute(f"pet:{name.lower()}", name, False, value) for name in _split_names(str(groups["names"]))]
    if key == "favorite":
        what = str(groups["what"])
        return [Attribute(f"favorite:{what.lower()}", value, True, what)]
    out = [Attribute(key if single else f"{key}:{slugify(value)[:40]}", value, single, previous=groups.get("prev") or "")]
    if groups.get("org"):
        out.append(Attribute("employer", str(groups["org"]), True))
    return out


def attributes_of_text(text: str) -> list[Attribute]:
    """Every attribute a user's sentence states about them, in the order of the rules."""
    out: list[Attribute] = []
    seen: set[tuple[str, str]] = set()
    taken: list[tuple[int, int]] = []  # spans already read as a value (a named pet is not also "my cats")
    for key, pattern, single in ATTRIBUTE_RULES:
        for m in pattern.finditer(text):
            if key in ("family", "pet", "died") and any(m.start() < end and start < m.end() for start, end in taken):
                continue
            for attr in _read(key, single, m.groupdict()):
                value = clean_value(attr.value)
                if not value or value.lower() in _NOT_VALUES or not names_a_thing(attr.key, value) or (attr.key, value.lower()) in seen:
                    continue
                seen.add((attr.key, value.lower()))
                taken.append((m.start(), m.end()))
                out.append(Attribute(attr.key, value, attr.single, attr.detail, clean_value(attr.previous)))
    return out
