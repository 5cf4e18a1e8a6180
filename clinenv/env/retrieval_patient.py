"""Deterministic retrieval patient: answers the doctor only from the patient facts P.

The default, offline patient (EGIP section 3.2: it sees P and the dialogue, never M or
Y); how a reply is chosen is in docs/environments.md.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from pydantic import JsonValue
from rapidfuzz import fuzz, process

from clinenv.datasets.availability import is_unavailable
from clinenv.env.patient_voice import as_caregiver, as_patient, finish_sentence
from clinenv.protocol.views import FrozenFacts, PatientView

#: Reply when no fact answers the question.
NOT_SURE = "I'm not sure."
#: Prefix of every reply given by a caregiver (``PatientView.caregiver_voice``).
CAREGIVER_PREFIX = "As the parent: "
#: Openers of the reply to a greeting or open question; ``{}`` is the primary symptom.
OPENING_SELF = "I'm here because of {}."
OPENING_CAREGIVER = "We're here because of {}."
#: Every fixed phrase a reply may contain besides the facts of P.
FIXED_PHRASES = (NOT_SURE, CAREGIVER_PREFIX, OPENING_SELF, OPENING_CAREGIVER)
#: Words the first-person/caregiver rephrasing may introduce (pronouns, auxiliaries).
REPHRASE_WORDS = frozenset(
    "i i'm i've i'd i'll my me myself am was not have haven't don't do been child".split()
)

#: Minimum score (similarity 0-100 plus bonuses) for a fact to be given.
MIN_SCORE = 75.0
#: Bonus for a fact in a topic bucket the question was routed to. Where any fact of the
#: bucket answers the question (age, family, medications, allergies, social history) the bonus alone
#: reaches :data:`MIN_SCORE`; elsewhere some word overlap is needed too.
TOPIC_BONUS = {"demographics": 80.0, "family": 75.0, "medications": 75.0, "allergies": 75.0,
               "social": 75.0}
DEFAULT_TOPIC_BONUS = 50.0
#: Bonus for a fact with a time expression when the question asks about onset.
ONSET_BONUS = 30.0
#: rapidfuzz ``ratio`` (0-100) at which a question word matches a word of P.
WORD_SIMILARITY = 85.0
#: Weight of a match on a word of the fact's key ("Secondary_Symptoms") vs its text.
LABEL_WEIGHT = 0.5
#: A second fact is added when it scores within this margin of the best one.
SECOND_MARGIN = 10.0
#: Fact indexes kept in the shared memo (least recently used dropped first).
CACHE_SIZE = 1024
#: Questions whose scored facts each fact index keeps (oldest dropped first; shared by
#: every patient, as the index is), so a question asked again -- the protocol's fixed
#: clarification questions, a doctor's repeated question, the same case played by a
#: group of rollouts -- is scored once; also the size of the process-wide memo of
#: question readings.
QUESTION_MEMO_SIZE = 64
#: Question stems whose matches each fact index keeps (oldest dropped first). Both memos
#: full take about 19 KB per MedQA index, so at most about 20 MB for CACHE_SIZE indexes.
STEM_MEMO_SIZE = 128

_BUCKET_OF_KEY = (
    ("medications", re.compile(r"medication|drug|prescri")),
    ("social", re.compile(r"social|substance|habit|occupation|interest")),
    ("family", re.compile(r"family")),
    ("allergies", re.compile(r"allerg")),
    ("past", re.compile(r"past|surgical|immuni|vaccin|birth|obstetric")),
    ("demographics", re.compile(r"demograph|\bage\b|\bsex\b|gender")),
    ("symptoms", re.compile(r"symptom|review of systems|complaint")),
)
_QUESTION_ROUTES = (
    ("symptoms", r"pain|hurt|ache|sore|symptom|feel|trouble|bother|worse|better|relie"),
    ("onset", r"when|how long|start|began|begin|onset|since|come on|came on|duration"),
    ("medications", r"medic(?:ation|ine)|(?<!any )(?<!use )(?<!illicit )(?<!recreational )drug"
     r"|pill|prescri|tablet|supplement|taking|treatment|therap"),
    ("social", r"smok|cigar|tobacco|alcohol|drink|beer|wine|work|job|occupation|live|travel"
     r"|sex|partner|recreational|illicit|use (?:any )?drugs|exercise|diet|married"),
    ("family", r"family|mother|father|parent|sibling|brother|sister|relative|inherit|genetic"),
    ("allergies", r"allerg"),
    ("past", r"past|previous|before|surger|operation|illness|condition|hospital|diagnosed"
     r"|vaccin|immuni"),
    ("demographics", r"\bage\b|how old|born|birth"),
)  # fmt: skip
_ROUTES = tuple((bucket, re.compile(rf"\b(?:{words})")) for bucket, words in _QUESTION_ROUTES)
_ROUTED_BUCKETS = {
    "symptoms": ("symptoms", "history"),
    "onset": ("history", "symptoms"),
}

_GREETING = re.compile(
    r"^\W*(?:hi|hello|hey|good (?:morning|afternoon|evening|day)|greetings)\b[\s,.!]*",
    re.IGNORECASE,
)
_OPEN_QUESTION = re.compile(
    r"^(?:what brings you|how can i help|what can i do for you|what seems to be"
    r"|what(?:'s| is) (?:wrong|going on|the (?:problem|matter|issue))|why are you here"
    r"|why did you come|how are you(?: feeling)?\W*$|(?:can you |please )?tell me "
    r"(?:more )?about (?:your|the) (?:symptoms|problem|complaint|concerns?|illness|story)"
    r"|what is your (?:main|chief) (?:complaint|concern|problem))",
    re.IGNORECASE,
)
_CONTINUE = re.compile(
    r"^(?:(?:can you |please )?tell me more|(?:is there )?anything else|go on|continue"
    r"|what else|and then)\b",
    re.IGNORECASE,
)
_NUMBER = r"(?:\d+|one|two|three|four|five|six|seven|eight|nine|ten|twelve)"
_UNIT = r"(?:hours?|days?|weeks?|months?|years?)"
_TIME = re.compile(
    rf"\b{_NUMBER}[- ]{_UNIT}\b(?![- ]old)|\b(?:past|last|previous|for\s+an?)\s+"
    rf"(?:few\s+|several\s+)?(?:{_NUMBER}\s+)?{_UNIT}\b"
    r"|\b(?:ago|since|began|started|onset|sudden|suddenly)\b",
    re.IGNORECASE,
)

_STOPWORDS = frozenset(
    """a an the and or but if of to in on at for with from by about as into over under
    is are was were be been being am do does did done have has had having can could will
    would should may might must shall you your yours yourself i me my we our us it its
    this that these those there here what which who whom whose when where why how any
    some anything something all tell please describe explain kind sort lot much many
    more most other else ever recently currently now today history experience
    experienced experiencing noticed notice get got doctor okay ok so just really very
    also too make makes made making take takes took anyone anybody someone
    everyone""".split()
)
_SUFFIXES = ("ings", "ing", "ers", "er", "ies", "es", "ed", "en", "s", "e")
_TOKEN = re.compile(r"[a-z0-9]+")


@functools.lru_cache(maxsize=65_536)
def _stem(word: str) -> str:
    """Crude suffix stripping so that "smoker"/"smokes"/"smoke" meet as "smok"."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


@functools.lru_cache(maxsize=4096)
def _stems(text: str) -> tuple[str, ...]:
    """Stemmed content words of a text, in order, without repeats (memoized: questions
    recur across episodes)."""
    words = _TOKEN.findall(text.lower().replace("'s", ""))
    return tuple(dict.fromkeys(_stem(w) for w in words if w not in _STOPWORDS))


# --- facts of P -----------------------------------------------------------------------

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9(\"'])")
_ABBREVIATION = re.compile(r"\b(?:dr|mr|mrs|ms|vs|e\.g|i\.e|approx|st|no)\.$", re.IGNORECASE)
_HEADER = re.compile(r"\*\*[^*]+\*\*\s*(?:\([^)]*\))?\s*:")
_BULLET = re.compile(
    r"(?:^|\s)[-\u2022]\s+(?=\S)|(?:^|(?<=[.:])\s)\s*\d{1,2}\.\s+(?=[A-Z*])", re.MULTILINE
)
_MARKUP = re.compile(r"[*#`]+")
_PREAMBLE = re.compile(
    r"^(?:for (?:your|the) role as (?:a|the) patient(?: actor)?|as (?:a|the) patient(?: actor)?"
    r"|for the patient actor|mention(?= \w+ing))\s*[,:]?\s*",
    re.IGNORECASE,
)
_INSTRUCTION = re.compile(
    r"^remember\b|\b(?:here'?s|here is|need to (?:convey|know)|should be aware of"
    r"|following (?:symptoms|information)|your character|patient actor|portrayal|your role"
    r"|described above)\b",
    re.IGNORECASE,
)


def _segments(text: str) -> Iterator[str]:
    """Sentences of one leaf string, with role-card markup and instructions removed."""
    text = _HEADER.sub("\n", _BULLET.sub("\n", text))
    for segment in _MARKUP.sub("", text).split("\n"):
        pieces: list[str] = []
        for piece in _SENTENCE_END.split(segment.strip()):
            if pieces and _ABBREVIATION.search(pieces[-1]):
                pieces[-1] = f"{pieces[-1]} {piece}"
            else:
                pieces.append(piece)
        for sentence in pieces:
            sentence = _PREAMBLE.sub("", sentence.strip(" -\u2022")).strip()
            if sentence.endswith(":"):
                sentence = sentence[:-1].rstrip() + "."
            dropped = _INSTRUCTION.search(sentence) and not re.search(r"\d", sentence)
            if sentence and _TOKEN.search(sentence.lower()) and not dropped:
                yield sentence[0].upper() + sentence[1:]


def _leaves(tree: JsonValue, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(tree, Mapping):
        for key, value in tree.items():
            yield from _leaves(value, (*path, str(key)))
    elif isinstance(tree, list | tuple):
        for item in tree:
            yield from _leaves(item, path)
    elif isinstance(tree, str) and not is_unavailable(tree):
        for sentence in _segments(tree):
            yield path, sentence
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        yield path, str(tree)


def _label(key: str) -> str:
    return key.replace("_", " ").strip().lower()


#: Buckets also given to a fact by its own words ("My brother had thyroid cancer" is a
#: family fact even inside a History or Patient_Info field).
_CONTENT_BUCKETS = ("medications", "social", "allergies", "past")
_FAMILY_CONTENT = re.compile(
    r"\bfamily\b|\b(?:father|mother|brother|sister|sibling|grand(?:mother|father|parent)|aunt"
    r"|uncle|cousin)s?\b[^.]*\b(?:had|has|died|diagnosed|history|suffer)",
    re.IGNORECASE,
)


def _topics(bucket: str, sentence: str) -> frozenset[str]:
    lower = sentence.lower()
    found = {b for b, pattern in _ROUTES if b in _CONTENT_BUCKETS and pattern.search(lower)}
    if _FAMILY_CONTENT.search(sentence):
        found.add("family")
    return frozenset({bucket, *found})


def _bucket(path: tuple[str, ...]) -> str:
    label = " ".join(_label(k) for k in path)
    for bucket, pattern in _BUCKET_OF_KEY:
        if pattern.search(label):
            return bucket
    return "history"


# --- the index ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Fact:
    order: int
    bucket: str  # from the key: decides the story order of open questions
    topics: frozenset[str]  # the key's bucket plus buckets named by the fact's words
    timed: bool  # holds a time expression
    spoken: tuple[str, str]  # (patient voice, caregiver voice), each a full sentence
    needle: str  # lower-case core of the spoken form, to find it in earlier replies


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity
class _Index:
    facts: tuple[_Fact, ...]
    vocabulary: tuple[str, ...]  # every stem of P (key labels included)
    postings: tuple[tuple[tuple[int, float], ...], ...]  # per stem: (fact order, weight)
    story: tuple[_Fact, ...]  # primary symptom, history, other symptoms: for open questions
    primary: _Fact | None
    # the vocabulary by length (stable), with each stem's length and vocabulary position:
    # the stems a question stem can match lie in one slice of it (_length_window)
    by_length: tuple[str, ...]
    lengths: tuple[int, ...]
    positions: tuple[int, ...]
    # per topic bucket, the facts holding it; the facts with a time expression
    by_topic: dict[str, tuple[_Fact, ...]] = field(default_factory=dict)
    timed: tuple[_Fact, ...] = ()
    # question -> _candidates(self, question), the oldest of QUESTION_MEMO_SIZE dropped
    scored: dict[str, tuple[tuple[int, _Fact], ...]] = field(default_factory=dict)
    # question stem -> its best credit per fact order (_stem_credit), the oldest of
    # STEM_MEMO_SIZE dropped: words recur across questions far more than questions do
    credited: dict[str, tuple[tuple[int, float], ...]] = field(default_factory=dict)


@functools.lru_cache(maxsize=CACHE_SIZE)
def _shared_index(facts: FrozenFacts) -> _Index:
    """The fact index of one P, memoized by content (a pure function of immutable input,
    shared by every simulator and environment in the process; thread-safe)."""
    return _build_index(facts)


def _build_index(facts: Mapping[str, JsonValue]) -> _Index:
    built: list[_Fact] = []
    seen: set[str] = set()
    primary: _Fact | None = None
    postings: dict[str, dict[int, float]] = {}
    for path, sentence in _leaves(facts, ()):
        if sentence in seen:
            continue
        seen.add(sentence)
        spoken = (finish_sentence(as_patient(sentence)),
                  finish_sentence(as_caregiver(sentence)))
        fact = _Fact(
            order=len(built),
            bucket=_bucket(path),
            topics=_topics(_bucket(path), sentence),
            timed=bool(_TIME.search(sentence)),
            spoken=spoken,
            needle=spoken[0].rstrip(".!?").lower(),
        )
        built.append(fact)
        label = _stems(_label(path[-1])) if path else ()
        for stem in label:
            postings.setdefault(stem, {})[fact.order] = LABEL_WEIGHT
        for stem in _stems(sentence):
            postings.setdefault(stem, {})[fact.order] = 1.0
        if primary is None and any("primary" in _label(k) for k in path):
            primary = fact
    story_order = {"history": 0, "symptoms": 1}
    story = sorted(
        (f for f in built if f.bucket in story_order and f is not primary),
        key=lambda f: (story_order[f.bucket], f.order),
    )
    if primary is not None:
        story.insert(0, primary)
    vocabulary = tuple(postings)
    positions = sorted(range(len(vocabulary)), key=lambda i: len(vocabulary[i]))
    by_topic: dict[str, list[_Fact]] = {}
    for fact in built:
        for topic in fact.topics:
            by_topic.setdefault(topic, []).append(fact)
    return _Index(
        facts=tuple(built),
        vocabulary=vocabulary,
        postings=tuple(tuple(weights.items()) for weights in postings.values()),
        story=tuple(story),
        primary=primary,
        by_length=tuple(vocabulary[i] for i in positions),
        lengths=tuple(len(vocabulary[i]) for i in positions),
        positions=tuple(positions),
        by_topic={topic: tuple(facts) for topic, facts in by_topic.items()},
        timed=tuple(f for f in built if f.timed),
    )


# --- the simulator --------------------------------------------------------------------


class RetrievalPatient:
    """Deterministic, offline patient simulator that answers only from P.

    It sees nothing but the :class:`~clinenv.protocol.views.PatientView` of each turn;
    there is no way to give it a case, the records M or the target Y.

    Example::

        patient = RetrievalPatient.for_facts(case.patient)
        patient.reply(PatientView(facts=case.patient, dialogue=(), question="Do you smoke?"))
    """

    @classmethod
    def for_facts(cls, facts: Mapping[str, JsonValue]) -> RetrievalPatient:
        """A patient whose fact index for ``facts`` is already built.

        Args:
            facts: the P tree the views will carry.

        Returns:
            A new :class:`RetrievalPatient`; it still answers views of any other P.
        """
        patient = cls()
        patient._index(facts)
        return patient

    def _index(self, facts: Mapping[str, JsonValue]) -> _Index:
        return _shared_index(facts if isinstance(facts, FrozenFacts) else FrozenFacts(facts))

    def reply(self, view: PatientView) -> str:
        """Answer the doctor's current question from ``view.facts``.

        Args:
            view: the patient view: P, the earlier dialogue, the question and whether a
                caregiver answers.

        Returns:
            One or two facts of P in the patient's (or caregiver's) voice, the opening
            complaint for a greeting or open question, or :data:`NOT_SURE`. The same view
            always gives the same reply.
        """
        index = self._index(view.facts)
        voice = 1 if view.caregiver_voice else 0
        earlier = " ".join([reply for _, reply in view.dialogue]).lower()
        last = view.dialogue[-1][1].lower() if view.dialogue else ""
        chosen, opening = _choose(index, view, earlier, last)
        text = " ".join(_say(index, f, voice, opening) for f in chosen) or NOT_SURE
        return CAREGIVER_PREFIX + text if view.caregiver_voice else text


def _choose(index: _Index, view: PatientView, earlier: str,
            last: str) -> tuple[list[_Fact], bool]:
    """``(facts to give, the question is an opening)`` for ``view.question``;
    ``earlier`` / ``last``: the earlier replies / the last one, lower case (a fact counts
    as given when its ``needle`` is in them)."""
    question = view.question.strip()
    rest, kind = _reading_memo(question)
    if kind == "opening":
        return _opening(index, earlier, last), True
    if kind == "continue":
        return [f for f in index.story if f.needle not in earlier][:2], False
    repeat_ok = bool(view.dialogue) and _same(view.dialogue[-1][0], question)
    return sorted(_retrieve(index, rest, earlier, "" if repeat_ok else last,
                            _candidates_memo), key=_order), False


def _read_question(question: str) -> tuple[str, str]:
    """``(question without its greeting, kind)``: kind ``"opening"`` (a greeting or an
    open question), ``"continue"`` ("Tell me more") or ``"question"``."""
    rest = _GREETING.sub("", question)
    if not _TOKEN.search(rest.lower()) or _OPEN_QUESTION.match(rest):
        return rest, "opening"
    return rest, "continue" if _CONTINUE.match(rest) else "question"


def _say(index: _Index, fact: _Fact, voice: int, opening: bool) -> str:
    """One fact as spoken; the primary symptom of an opening goes into the opener."""
    if opening and fact is index.primary:
        symptom = fact.spoken[0].rstrip(".!?")
        if symptom[1:2].islower():
            symptom = symptom[0].lower() + symptom[1:]
        return (OPENING_CAREGIVER if voice else OPENING_SELF).format(symptom)
    return fact.spoken[voice]


def _opening(index: _Index, earlier: str, last: str) -> list[_Fact]:
    """Primary symptom and first history sentence; the next untold facts if just given."""
    opening = list(index.story[:2])
    if opening and all(f.needle in last for f in opening):
        opening = [f for f in index.story if f.needle not in earlier][:2]
    return opening


def _order(fact: _Fact) -> int:
    return fact.order


def _same(a: str, b: str) -> bool:
    return _stems(a) == _stems(b)


@functools.lru_cache(maxsize=4096)
def _routes(question: str) -> tuple[frozenset[str], bool]:
    lower = question.lower()
    buckets: set[str] = set()
    onset = False
    for bucket, pattern in _ROUTES:
        if pattern.search(lower):
            buckets.update(_ROUTED_BUCKETS.get(bucket, (bucket,)))
            onset = onset or bucket == "onset"
    return frozenset(buckets), onset


def _length_window(length: int) -> tuple[int, int]:
    """The lengths ``(shortest, longest)`` of the stems a stem of ``length`` characters can
    match: rapidfuzz ``ratio`` is ``100 * (1 - d / (la + lb))`` with the indel distance
    ``d >= |la - lb|``, so a stem outside these lengths scores below
    :data:`WORD_SIMILARITY` (the window is kept a little wide against rounding)."""
    if length < len(_WINDOWS):
        return _WINDOWS[length]

    def reachable(other: int) -> bool:
        total = length + other
        return 100.0 * (total - abs(length - other)) >= WORD_SIMILARITY * total - 1e-6

    shortest = next(n for n in range(1, length + 1) if reachable(n))
    longest = length
    while reachable(longest + 1):
        longest += 1
    return shortest, longest


_WINDOWS: tuple[tuple[int, int], ...] = ()
_WINDOWS = tuple(_length_window(n) if n else (0, 0) for n in range(65))


def _coverage(index: _Index, stems: tuple[str, ...]) -> dict[int, float]:
    """Per fact order, the share (0-100) of the question's stems the fact holds.

    A question stem matches a stem of P when their rapidfuzz ``ratio`` is at least
    :data:`WORD_SIMILARITY` (so "diabet" meets "diabetic"), credited by that ratio, times
    :data:`LABEL_WEIGHT` when the stem comes only from the fact's key; each question stem
    gives a fact its best such credit (:func:`_stem_credit`).
    """
    credit: dict[int, float] = {}
    memo = index.credited
    for stem in stems:
        best = memo.get(stem)
        if best is None:
            best = memo[stem] = _stem_credit(index, stem)
            _bound(memo, STEM_MEMO_SIZE)
        for order, similarity in best:
            credit[order] = credit.get(order, 0.0) + similarity / len(stems)
    return credit


def _stem_credit(index: _Index, stem: str) -> tuple[tuple[int, float], ...]:
    """``(fact order, best similarity x weight)`` of one question stem, in the order the
    facts are first matched. Only the stems of P whose length can reach
    :data:`WORD_SIMILARITY` are scored (:func:`_length_window`)."""
    shortest, longest = _length_window(len(stem))
    lengths = index.lengths
    start = bisect.bisect_left(lengths, shortest)
    stop = bisect.bisect_right(lengths, longest, start)
    positions = index.positions[start:stop]
    best: dict[int, float] = {}
    for _, similarity, at in process.extract(
        stem, index.by_length[start:stop], scorer=fuzz.ratio,
        score_cutoff=WORD_SIMILARITY, limit=None
    ):
        for order, weight in index.postings[positions[at]]:
            best[order] = max(best.get(order, 0.0), similarity * weight)
    return tuple(best.items())


def _bound(memo: dict, size: int) -> None:
    """Drop the oldest entry of ``memo`` when it holds more than ``size``."""
    if len(memo) > size:
        try:
            memo.pop(next(iter(memo)), None)
        except (RuntimeError, StopIteration):  # another thread changed it meanwhile
            pass


def _candidates(index: _Index, question: str) -> tuple[tuple[int, _Fact], ...]:
    """The facts of ``index`` that score at least :data:`MIN_SCORE` for ``question``, as
    ``(-round(score), fact)`` in fact order; a function of the question alone.

    Only facts the question reaches are scored -- a matched stem, a routed topic, a time
    expression when it asks when -- since any other fact scores 0."""
    stems = _stems(question)
    buckets, onset = _routes(question)
    coverage = _coverage(index, stems) if stems else {}
    bonus = {b: TOPIC_BONUS.get(b, DEFAULT_TOPIC_BONUS) for b in buckets}
    facts = index.facts
    reached = set(coverage)
    for bucket in buckets:
        reached.update(f.order for f in index.by_topic.get(bucket, ()))
    if onset:
        reached.update(f.order for f in index.timed)
    scored: list[tuple[int, _Fact]] = []
    for order in sorted(reached):
        fact = facts[order]
        score = coverage.get(order, 0.0)
        routed = fact.topics & buckets
        if routed:
            score += max(map(bonus.__getitem__, routed))
        score += ONSET_BONUS if onset and fact.timed else 0.0
        if score >= MIN_SCORE:
            scored.append((-round(score), fact))
    return tuple(scored)


def _retrieve(index: _Index, question: str, earlier: str, last: str,
              candidates=_candidates) -> list[_Fact]:
    """The best one or two facts for a question, avoiding a repeat of ``last``
    (``candidates``: :func:`_candidates` or a memo of it)."""
    scored = [(neg, fact.needle in earlier, fact.order, fact)
              for neg, fact in candidates(index, question)]
    scored.sort()
    chosen = _top_two(scored)
    if last and chosen and all(f.needle in last for f in chosen):
        fresh = [entry for entry in scored if entry[3].needle not in last]
        chosen = _top_two(fresh) or chosen
    return chosen


def _top_two(scored: list[tuple[float, bool, int, _Fact]]) -> list[_Fact]:
    if not scored:
        return []
    chosen = [scored[0][3]]
    if len(scored) > 1 and scored[1][0] - scored[0][0] <= SECOND_MARGIN:
        chosen.append(scored[1][3])
    return chosen


def _candidates_memo(index: _Index, question: str) -> tuple[tuple[int, _Fact], ...]:
    """:func:`_candidates`, kept in ``index.scored`` (a patient holds no state, so copies
    and threads share it; two threads may score one question twice, never wrongly)."""
    scored = index.scored
    found = scored.get(question)
    if found is None:
        found = scored[question] = _candidates(index, question)
        _bound(scored, QUESTION_MEMO_SIZE)
    return found


# the process-wide memo of a pure function of the question text alone
_reading_memo = functools.lru_cache(maxsize=QUESTION_MEMO_SIZE)(_read_question)
