"""What a user's own sentence says about them, without a model: profile attributes, the topic a
sentence is about, relative dates anchored to the session, and the things they own or deal with.

Everything here reads one sentence. Values are verbatim parts of it (so a fact card's value is
on its cited line); nothing is inferred or guessed. A relative date ("last year", "three years
ago") is anchored to the date the sentence was said, as a note; a vague one ("a few years ago")
is only placed before that date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

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
_PARTNER = r"wife|husband|partner|spouse|boyfriend|girlfriend|fianc[ée]e?"
_FAMILY = (
    r"mom|mother|mum|dad|father|parents|brother|sister|siblings|grandma|grandmother|grandpa|grandfather|grandparents|"
    r"aunt|uncle|cousin|niece|nephew|stepdad|stepmom|stepfather|stepmother|mother-in-law|father-in-law|in-laws|"
    r"best friend|friend|daughter|son|kids|children|child|baby|twins|grandson|granddaughter|grandkids|grandchildren"
)
_PETS = r"cats?|dogs?|pupp(?:y|ies)|pups?|kittens?|kitty|bunn(?:y|ies)|rabbits?|hamsters?|parrots?|birds?|fish|turtles?|horses?|guinea pigs?|snakes?|lizards?"
_COUNT = r"(?:an?|another|one|two|three|four|five|six|\d+)"
_INSTRUMENTS = (
    r"violin|guitar|piano|drums|cello|flute|saxophone|sax|trumpet|ukulele|bass|harp|clarinet|keyboard|"
    r"tennis|soccer|football|basketball|golf|chess|volleyball|baseball|hockey|badminton|rugby|cricket|pickleball|video games|board games"
)
_ACTIVITIES = (
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
    ("partner", re.compile(rf"(?i:\bmy (?:{_PARTNER})(?:'s name)?(?: is|,)?)\s+(?P<v>{_NAME})(?!')"), True),
    (
        "died",
        re.compile(
            rf"(?i:\bmy late (?P<rel>{_FAMILY}|{_PARTNER}))\b|(?i:\bmy (?P<rel2>{_FAMILY}|{_PARTNER})(?:,? {_NAME},?)? (?P<detail>passed away|died|passed))\b"
            rf"|(?i:\b(?P<detail2>lost) my (?P<rel3>{_FAMILY}|{_PARTNER}))\b"
        ),
        False,
    ),
    ("child", re.compile(rf"(?i:\bmy (?:daughter|son|kid|child|baby)(?:'s name)?(?: is|,)?)\s+(?P<v>{_NAME})(?!')"), False),
    ("family", re.compile(rf"(?i:\bmy (?P<rel>{_FAMILY})(?:'s name is|,| named| called)?)\s+(?P<v>{_NAMES})(?!')"), False),
    ("family", re.compile(rf"(?i:\bmy (?:{_COUNT} )?)(?P<v>{_PARTNER}|{_FAMILY})\b(?!-)"), False),
    ("pet", re.compile(rf"(?i:\bmy (?:{_COUNT} )?(?P<rel>{_PETS})(?:'s name is|,| named| called)?)\s+(?P<v>{_NAMES})(?!')"), False),
    (
        "pet",
        re.compile(
            rf"(?i:\b(?:I|we) (?:have|got|adopted|own) )(?P<v>{_COUNT} (?:[a-z]+ )?(?:{_PETS}))\b(?:,? (?:named|called) (?P<names>{_NAMES}))?"
        ),
        False,
    ),
    # "my horse painting" is a painting
    (
        "pet",
        re.compile(
            rf"(?i:\bmy )(?P<v>{_PETS})\b(?!-)(?! (?i:painting|drawing|picture|photo|sculpture|toy|food|treat|costume|shirt|mug|print)s?\b)"
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
            rf"(?i:\bI (?:really |also |just |absolutely |totally )?(?:love|loved|enjoy|enjoyed|like|adore)|\bI (?:often |usually |regularly )?go)\s+(?P<v>(?:(?:{_ACTIVITIES}|(?!being an?\b)[a-z]+ing)(?! (?:my|our|his|her|their)\b)(?: (?!{_STOP})[a-z]+){{0,2}}))\b"
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


def _clean(value: str) -> str:
    return value.strip().rstrip(".,;:!").strip()


_NOT_VALUES = {"i", "a", "an", "the", "my", "it", "this", "that", "them", "these", "those", "everything", "something", "anything", "things"}


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
                value = _clean(attr.value)
                if not value or value.lower() in _NOT_VALUES or (attr.key, value.lower()) in seen:
                    continue
                seen.add((attr.key, value.lower()))
                taken.append((m.start(), m.end()))
                out.append(Attribute(attr.key, value, attr.single, attr.detail, _clean(attr.previous)))
    return out


# ---- sentences without "I" ---------------------------------------------------------------

# People leave the subject out when it is themselves: "Love my new job at the bakery!", "Just got
# back from Paris", "Been teaching yoga for 5 years", "Going to adopt a puppy next month". Each
# rule is a way such a sentence starts and the subject it leaves out; the verb forms are those
# that only "I" (or "we") fits: "Loves her job" (someone else) and "Sounds great" (it) are not.
_LEAD = r"(?:(?:oh|well|so|yeah|yes|and|also|plus|anyway|actually|honestly|finally)[,!]?\s+)*"
_ADV = r"(?:(?:just|finally|recently|also|really|currently|still|now|totally|absolutely|actually|already)\s+)?"
IMPLIED_SUBJECT_RULES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(rf"^{_LEAD}(?={_ADV}been\s+(?:\w+ing|to|busy|married|together|sick|away)\b)", re.I), "I've "),
    (
        re.compile(
            rf"^{_LEAD}(?={_ADV}(?:(?:going to|gonna)(?! be\b)|heading (?:to|off|out|home)|planning|thinking (?:of|about)|hoping to|looking forward|"
            rf"working (?:as|at|for|on)|teaching|learning|researching|looking into|trying to|starting|moving|volunteering|training for|"
            rf"studying|saving (?:up )?for|getting ready|loving)\b)",
            re.I,
        ),
        "I'm ",
    ),
    (
        re.compile(
            rf"^{_LEAD}(?={_ADV}(?:got|went|moved|started|finished|bought|adopted|visited|quit|lost|joined|took|spent|signed up|"
            rf"ran|painted|tried|decided|booked|learned|learnt|met|came back|returned|graduated|won(?!')|completed|celebrated|"
            rf"picked up|finally got)\b(?! by\b))",
            re.I,
        ),
        "I ",
    ),
    # a feeling about one's own things: "Love my new job", "Miss my dad" ("Love it!" says nothing)
    (re.compile(rf"^{_LEAD}(?={_ADV}(?:(?:love|miss|hate|adore|enjoy|need)\s+(?:my|our)\b|(?:highly )?recommend\b))", re.I), "I "),
]
# "you" in it: the sentence is about, or to, the other person
_TO_SOMEONE_RE = re.compile(r"\b(?:you|your|yours|you're|you've|you'll|ya)\b", re.I)
# a sentence whose subject is someone else ("My sister is visiting.", "How's your dad?",
# "Did Tom get the job?"): a subject-less sentence right after it may be about them
_OTHER_SUBJECT_RE = re.compile(
    rf"^(?i:{_LEAD}(?:(?:how|what|where|when|why|did|does|do|is|was|has|have|will|are|and)(?:'s| is| was| are| did| does| has)?\s+)?)"
    rf"(?:(?i:(?:my|your|his|her|their|our)\s+(?:\w+\s+)?(?:{_PARTNER}|{_FAMILY}|{_PETS}|boss|manager|coworkers?|colleagues?|neighbou?rs?))\b"
    rf"|(?i:he|she|they|he's|she's|they're)\b"
    rf"|(?<=\s)(?<!\bI )(?-i:(?!I\b)[A-Z][a-z]+)(?= \w+[^?]*\?)"
    rf"|(?!(?:That|This|It|There|Here|How|What|Which|Who|Where|When|Why|Everything|Nothing|Life|Today|Wow|Thanks|Yes|Yeah|Oh|Well|So|Sounds|Looks)\b)"
    rf"[A-Z][a-z]+(?:'s)? (?:is|was|has|had|just|got|went|and|said|told|loves?|started|moved|will|can)\b)"
)


# "Teaching yoga is my passion": the -ing phrase is the subject, not something the speaker is doing
_SUBJECT_ING_RE = re.compile(
    rf"^{_LEAD}\w+ing\b[^.!?,\-–—]*?\b(?:is|was|are|were|has|had|makes|made|helps|helped|can|gives|gave|keeps|means)(?:n't)?\b", re.I
)


def implied_subject(sentence: str, before: str = "") -> str:
    """``sentence`` with the "I" it leaves out ("I just got back from Paris"), or "" when it has
    a subject of its own or it may be about someone else: it speaks to someone ("you"), or the
    sentence said just ``before`` it (the speaker's previous one, or the question it answers)
    has another person as its subject ("How's your sister?" / "Just got back from Paris!")."""
    text = sentence.strip()
    if (
        _TO_SOMEONE_RE.search(text)
        or _SUBJECT_ING_RE.match(text)
        or (before and _OTHER_SUBJECT_RE.search(before.strip()) and not implied_subject(before))
    ):
        return ""
    for pattern, subject in IMPLIED_SUBJECT_RULES:
        m = pattern.match(text)
        if m:
            rest = text[m.end() :]
            return f"{subject}{rest[:1].lower()}{rest[1:]}"
    return ""


# ---- topics: what a sentence is about ----------------------------------------------------

# Each topic is recognised by words that say what the sentence is about: a noun the speaker
# owns or deals with ("my job", "the flight"), or a verb whose subject is the speaker ("I work",
# "we flew"); a word that only appears in passing ("a time that works for both of us") is not one.
_SELF = r"(?:I|I'm|I've|I'll|I'd|we|we're|we've|we'll)"
TOPICS: list[tuple[str, str, re.Pattern[str]]] = [
    (
        "vehicles",
        "Vehicles",
        re.compile(
            rf"\b(?:cars?|vehicles?|honda|tesla|toyota|ford|bmw|vin|mileage|dealership|tyres?|tires?|oil change)\b|\b{_SELF} (?:drive|drove|leased?|bought a car)\b",
            re.I,
        ),
    ),
    (
        "travel",
        "Travel",
        re.compile(
            rf"\b(?:flights?|trips?|airport|hotels?|passport|visa|vacation|holiday|airline|frequent flyer|itinerary|boarding|luggage|layover|road trip)\b"
            rf"|\b{_SELF} (?:(?:will |am |are |'m |'re )?(?:fly|flew|flying|travel\w*|went abroad))\b|\bseats?\b(?= on| in| for|\.|$)",
            re.I,
        ),
    ),
    (
        "health",
        "Health",
        re.compile(
            r"\b(?:doctor|allerg\w*|medication|medicine|hospital|health|dentist|therapy|therapist|diagnos\w*|symptoms?|surgery|pregnan\w*|"
            r"injur\w*|sick|illness|physio\w*|prescription|check-?up|asthma|diabetes)\b",
            re.I,
        ),
    ),
    (
        "finances",
        "Finances",
        re.compile(
            r"(?:\$|€|£|\b(?:bank|accounts?|income|salary|loan|mortgage|credit card|debit card|payments?|insurance|invest\w*|savings|budget|taxe?s?|"
            r"paycheck|rent|debt|retirement fund|401\(k\)|pension)\b)",
            re.I,
        ),
    ),
    (
        "pets",
        "Pets",
        re.compile(rf"\b(?:my|our|the|your) (?:{_PETS})\b|\b(?:vet|veterinarian|adopted a (?:{_PETS}))\b", re.I),
    ),
    (
        "food",
        "Food and drink",
        re.compile(
            rf"\b(?:vegetarian|vegan|food|meals?|dinner|lunch|breakfast|recipes?|restaurants?|coffee|alcohol|wine|beer|cooking|baking)\b|\b{_SELF} (?:eat|ate|drink|cook|cooked|bake|baked)\b",
            re.I,
        ),
    ),
    (
        "work",
        "Work",
        re.compile(
            r"\b(?:my|our|new|the|at|from|after|before|to) (?:work|job|boss|manager|employer|office|colleagues?|coworkers?|career|shift|clients?|promotion|team lead)\b"
            rf"|\b{_SELF} (?:(?:now |still |also |currently |started |stopped |began |kept )?(?:work|worked|working)|(?:got|quit|lost|started|love|hate) (?:a |my |the )?(?:new )?job)\b"
            r"|\b(?:salary|promotion|interview|career|hired|fired|resume|coworkers?)\b",
            re.I,
        ),
    ),
    (
        "family",
        "Family and friends",
        re.compile(rf"\b(?:{_PARTNER}|{_FAMILY}|family|fam|friends?|wedding|anniversary|married|divorced|engaged)\b", re.I),
    ),
    (
        "hobbies",
        "Hobbies",
        re.compile(
            rf"\b(?:hobby|hobbies|painting|paintings|drawing|pottery|knitting|gardening|photography|reading|books?|novels?|concerts?|band|music|"
            rf"guitar|violin|piano|{_ACTIVITIES}|yoga|gym|workout|marathon|race|games?|movies?|hike|hikes)\b",
            re.I,
        ),
    ),
]

# an attribute decides the topic of its sentence
_ATTRIBUTE_TOPICS = {
    "occupation": "work",
    "employer": "work",
    "business": "work",
    "manager": "work",
    "partner": "family",
    "child": "family",
    "family": "family",
    "died": "family",
    "pet": "pets",
    "allergy": "health",
    "condition": "health",
    "medication": "health",
    "hobby": "hobbies",
    "interest": "hobbies",
    "former-job": "work",
    "visited": "travel",
    "diet": "food",
    "seat": "travel",
}


def topic_of_text(text: str, attributes: list[Attribute] | None = None) -> tuple[str, str]:
    """The topic a sentence is about: the one of its attribute, else the topic with the most
    telling words in it (the first of them on a tie), else "notes"."""
    titles = {slug: title for slug, title, _ in TOPICS}
    for attr in attributes or []:
        slug = _ATTRIBUTE_TOPICS.get(attr.key.split(":")[0])
        if slug:
            return slug, titles[slug]
    best: tuple[int, int, str] | None = None
    for slug, _title, pattern in TOPICS:
        hits = list(pattern.finditer(text))
        if hits:
            score = (-len(hits), hits[0].start(), slug)
            best = score if best is None or score < best else best
    if best is None:
        return "notes", "Other facts"
    return best[2], titles[best[2]]


# ---- relative dates ------------------------------------------------------------------------

_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10}
_WEEKDAYS = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]
RELATIVE_RE = re.compile(
    r"\b(?:(?P<n>\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple of|several) (?P<unit>days?|weeks?|months?|years?) ago"
    r"|(?P<rel>last|next|this past|this coming) (?P<what>week|weekend|month|year|summer|winter|spring|fall|autumn|monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
    r"|(?P<day>yesterday|tomorrow))\b",
    re.I,
)


def _month_shift(d: date, months: int) -> tuple[int, int]:
    total = d.year * 12 + d.month - 1 + months
    return total // 12, total % 12 + 1


def anchor(phrase: re.Match[str], said: date) -> str:
    """What a relative date means, counted from the day it was said (never a guess: a vague
    amount only says "before")."""
    g = phrase.groupdict()
    if g["day"]:
        return (said - timedelta(days=1) if g["day"].lower() == "yesterday" else said + timedelta(days=1)).isoformat()
    if g["n"]:
        unit = g["unit"].lower().rstrip("s")
        amount = _NUMBERS.get(g["n"].lower()) if not g["n"].isdigit() else int(g["n"])
        if amount is None:
            return f"some {unit}s before {said.isoformat()}"
        if unit == "day":
            return (said - timedelta(days=amount)).isoformat()
        if unit == "week":
            return f"the week of {(said - timedelta(weeks=amount)).isoformat()}"
        if unit == "month":
            year, month = _month_shift(said, -amount)
            return f"{_MONTHS[month - 1]} {year}"
        return f"{said.year - amount}"
    step = 1 if g["rel"].lower() in ("next", "this coming") else -1
    what = g["what"].lower()
    if what in _WEEKDAYS:
        target = _WEEKDAYS.index(what)
        delta = (said.weekday() - target) % 7 or 7
        return (said - timedelta(days=delta) if step < 0 else said + timedelta(days=(target - said.weekday()) % 7 or 7)).isoformat()
    if what in ("week", "weekend"):
        return f"the {what} of {(said + timedelta(weeks=step)).isoformat()}"
    if what == "month":
        year, month = _month_shift(said, step)
        return f"{_MONTHS[month - 1]} {year}"
    if what == "year":
        return str(said.year + step)
    return f"the {what} {'before' if step < 0 else 'after'} {said.isoformat()}"


def date_note(text: str, said_on: str) -> str:
    """``"last year" = 2022, counted from 2023-05-08`` for each relative date of a sentence, or ""."""
    try:
        said = date.fromisoformat(said_on)
    except ValueError:
        return ""
    parts = [f'"{m.group(0)}" = {anchor(m, said)}' for m in RELATIVE_RE.finditer(text)]
    return f"{'; '.join(parts)}, counted from {said_on}" if parts else ""


# ---- things a user owns or deals with ----------------------------------------------------------

ENTITY_KINDS = {
    "vehicles": "cars and other vehicles",
    "cards": "cards",
    "accounts": "accounts",
    "policies": "insurance policies",
    "warranties": "warranties",
    "devices": "devices",
    "doctors": "doctors",
}
_BRAND_CARD = r"(?:Chase (?:Sapphire (?:Reserve|Preferred)|Freedom(?: Unlimited| Flex)?)|Sapphire (?:Reserve|Preferred)|AmEx(?: [A-Z]\w+)?|American Express(?: [A-Z]\w+)?|Capital One [A-Z]\w+|Citi [A-Z]\w+|Discover(?: it)?|Apple Card|Visa(?: [A-Z]\w+)?|Mastercard)"
ENTITY_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("cards", re.compile(rf"\b({_BRAND_CARD})\b(?: (?:card|credit card))?")),
    (
        "cards",
        re.compile(
            r"(?i:\b(?:my|the|a|your) (?:new )?)((?:[A-Z][\w&]*\s){0,3}(?i:credit|debit|library|gym|membership|gift|loyalty|id|insurance) card)\b"
        ),
    ),
    (
        "accounts",
        re.compile(
            r"\b((?:[A-Z][\w&]* ){0,2}(?i:checking|savings|brokerage|retirement|joint|business|student|roth ira|ira|401\(k\)|hsa|paypal|venmo) account)\b"
        ),
    ),
    ("accounts", re.compile(r"\b((?:Premium|Basic|Elite|Student|Everyday) (?:Checking|Savings))\b")),
    (
        "policies",
        re.compile(
            r"\b((?:[A-Z][\w&]* ){0,2}(?i:car|auto|home|renters|health|life|travel|dental|pet|homeowners?) insurance(?: policy)?)\b"
        ),
    ),
    ("policies", re.compile(r"\b((?:[A-Z][\w&]* ){1,2}(?i:policy))\b")),
    ("warranties", re.compile(r"\b((?:[A-Z][\w&]* ){0,3}(?i:extended )?(?i:warranty))\b")),
    (
        "devices",
        re.compile(
            r"\b((?:Apple |Samsung |Google )?(?:iPhone|iPad|MacBook(?: Air| Pro)?|iMac|Galaxy|Pixel|Kindle|Apple Watch|AirPods|ThinkPad|Surface|PlayStation|Xbox|Nintendo Switch)(?: (?:Pro|Max|Plus|Mini|Ultra|Air|\d+[A-Za-z]*))*)\b"
        ),
    ),
    ("doctors", re.compile(r"\b((?:Dr\.|Doctor) [A-Z][\w'\-]+(?: [A-Z][\w'\-]+)?)")),
]
VEHICLE_RE = re.compile(r"\b((?:19|20)\d{2}) ([A-Z][a-zA-Z]+(?:-[A-Z][a-z]+)?) ([A-Z0-9][\w-]*(?: [0-9A-Z][\w-]*)?)")
# identifiers and amounts said with an entity: numbers, confirmations, expiry
DETAIL_RE = re.compile(
    r"\b(?:number|no\.|#|confirmation|policy|account|card ending in|ending in|expires?|expiring|expiration|valid until|due|renews?|limit|fee|balance)\b[^.;!?]{0,40}?"
    r"(?:[A-Z]{1,5}-?\d[\w-]{2,}|\$?\d[\d,.\-/]*\d|\b(?:January|February|March|April|May|June|July|August|September|October|November|December)\b[^.;!?]{0,12})",
    re.I,
)


def entities_of_text(text: str, known: dict[str, list[str]]) -> list[tuple[str, str]]:
    """The (kind, name) of each thing a sentence names: a new one ("my Chase Sapphire Reserve",
    "a 2019 Honda Accord") or a known one named in part ("the Sapphire", "the Civic"). A part
    that fits two known things of a kind (two Hondas) names neither."""
    found: list[tuple[str, str]] = []
    vehicle = vehicle_of(text, known.setdefault("vehicles", []))
    if vehicle:
        found.append(("vehicles", vehicle))
    for kind, pattern in ENTITY_PATTERNS:
        for m in pattern.finditer(text):
            name = _clean(re.sub(r"^(?:my|the|a|your|new) ", "", m.group(1), flags=re.I))
            if len(name) < 3:
                continue
            names = known.setdefault(kind, [])
            same = next((n for n in names if n.lower() == name.lower() or name.lower() in n.lower().split(" ", 1)[-1:]), None)
            if same is None:
                names.append(name)
                same = name
            if (kind, same) not in found:
                found.append((kind, same))
    if found:
        return found
    lowered = text.lower()
    for kind, names in known.items():
        if kind == "vehicles":
            continue
        hits = [n for n in names if _distinctive(n) and _distinctive(n).lower() in lowered]
        if len(hits) == 1:
            found.append((kind, hits[0]))
    return found


def _distinctive(name: str) -> str:
    """The part of a name that alone still names it: "Sapphire" of "Chase Sapphire Reserve"."""
    words = [w for w in name.split() if w[:1].isupper() and w.lower() not in ("chase", "apple", "google", "samsung", "dr.", "doctor")]
    return words[0] if words else ""


def vehicle_of(text: str, known: list[str]) -> str | None:
    """The vehicle a sentence is about: a new "2019 Honda Accord", or a known one named by make
    or model ("the Honda", "my Tesla"). Same-make vehicles stay apart by year and model."""
    m = VEHICLE_RE.search(text)
    if m:
        found = m.group(0)
        year, words = m.group(1), set(found.split()[1:])
        for vehicle in known:
            if vehicle.split()[0] == year and words & set(vehicle.split()[1:]):
                return vehicle
        known.append(found)
        return found
    lowered = text.lower()
    hits = [v for v in known if any(part.lower() in lowered.split() or f" {part.lower()}" in lowered for part in v.split()[1:])]
    return hits[0] if len(hits) == 1 else None


def entity_details(text: str) -> list[str]:
    """Identifiers, amounts and dates said in a sentence about a thing, verbatim."""
    return [_clean(m.group(0)) for m in DETAIL_RE.finditer(text)]
