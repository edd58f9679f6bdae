"""Which Instruction Following requirements ask about what is heard (FIRM-Video, seed §3.2 and
Appendix 1.1: the planner excludes audio-only requirements; the verifier sees frames, never sound).

A requirement is audio when its yes/no answer turns on something heard: a sound or noise, loudness
or silence, a voice, the words spoken or their topic, music or a song as heard, a tune. What is
seen stays, also when it relates to sound: a musician or an instrument being played, a band, a
person speaking, singing, shouting or giving a speech (the visible act), a dog barking, a
loudspeaker, a studio, musical notes drawn somewhere, a sign whose text names a sound, a sound
source asked about as seen (a narrator visible on screen, a choir on the steps, a sound engineer at
the desk). A narrator asked about without a word of sight ("does a narrator describe the market")
is the voice, heard. The same
visible act qualified by how it sounds ("barks loudly", "in a deep voice", "whistles a tune") or
by what is said ("says 'thank you'", "talks about the weather") is audio.

The planner's instruction says this first (``prompts.IF_PLAN_SYSTEM``); :func:`audio_reason` is
the safety net on what the planner returns. It reads the requirement's words with rules, quoted
text left out (a sign reading 'SOUND CITY' is text that is seen), and says which words made it audio.
"""

from __future__ import annotations

import re

# Quoted text: what a sign, a shirt or a speaker says. An apostrophe inside a word ("man's") opens
# or closes nothing.
_QUOTED = re.compile(r"(?<!\w)'[^']+'(?!\w)|\"[^\"]+\"|‘[^’]+’|“[^”]+”")

# Words that are about hearing whatever they qualify.
_HEARD = re.compile(
    r"\b(hear|hears|heard|hearing|audible|audibly|inaudible|audio|soundtrack|voice-?overs?|narrat(?:ion|or|ors|es|ed|ing|e)|"
    r"lyrics|melod(?:y|ies|ic|ious)|loud|louder|loudest|loudly|noisy|quiet|silent|silence|volume|"
    r"echo|echoes|echoed|echoing|voices?|laughter|chatter|thunder|high-pitched|low-pitched|"
    r"chirp|chirps|chirped|chirping|hum|hums|humming|hummed|buzz|buzzes|buzzing|buzzed|beep\w*|"
    r"honk|honks|honking|honked|quack\w*|meow\w*|blaring|wailing|applause)\b", re.IGNORECASE)
_NOISE = re.compile(r"\b(?<!visual )(?<!image )(?<!digital )(?<!film )(?<!sensor )(?<!video )noises?\b", re.IGNORECASE)
_TUNE = re.compile(r"\b(a|the|his|her|their|its|in|out of|whistl\w*|hum\w*)\s+(\w+\s+)?tunes?\b", re.IGNORECASE)
# "sound" as heard; a place name ("Puget Sound"), capitals (a sign's SOUND) and "sound asleep" are not.
_SOUND = re.compile(r"\b[sS]ound(s|ed|ing)?\b")
# A person or thing named after sound, seen: a sound engineer at the desk, a sound system on a stage.
_SOUND_SEEN_AFTER = re.compile(r"\s+(engineers?|technicians?|recordists?|crew|systems?|desks?|boards?|booths?|"
                               r"stages?|waves?|mixers?|equipment|gear|panels?|barriers?)\b", re.IGNORECASE)
# A source of sound that is also a person in the picture (a narrator), and the words that ask about
# it as seen: a narrator visible on screen, standing, wearing something, is asked about as seen.
_SOURCE_PERSON = re.compile(r"narrators?", re.IGNORECASE)
_SEEN = re.compile(r"\b(visible|on[- ]screen|on camera|in (the )?(frame|shot|picture)|in view|shown|show|shows|"
                   r"showing|seen|appear\w*|depicted|pictured|stand\w*|sit|sits|sitting|sat|wear\w*|hold\w*|"
                   r"walk\w*|dressed|gestur\w*|point\w*|fac(e|es|ing) the camera)\b", re.IGNORECASE)
_MUSIC = re.compile(r"\bmusic\b", re.IGNORECASE)
_MUSIC_SEEN_AFTER = re.compile(r"\s+(studio|studios|store|shop|stand|stands|hall|room|school|class|video|festival|"
                               r"notes?|book|box|sheet)\b", re.IGNORECASE)
_MUSIC_AS_OBJECT = re.compile(r"\b(play|plays|playing|played|perform\w*|practi[cs]\w*|mak\w*|compos\w*|read\w*|"
                              r"sheet)\s+(\w+\s+)?$", re.IGNORECASE)
_SONG = re.compile(r"\bsongs?\b", re.IGNORECASE)
_SONG_SUNG = re.compile(r"\b(sing|sings|singing|sang|sung|perform\w*)\s+(\w+\s+){0,2}$", re.IGNORECASE)
_VOICE_ACT = r"(speak|speaks|speaking|spoke|talk|talks|talking|talked|sing|sings|singing|sang|whisper\w*|chat\w*|" \
             r"discuss\w*|say|says|said|saying|shout\w*|yell\w*|call\w*|bark\w*|roar\w*|laugh\w*|chant\w*)"
_TOPIC = re.compile(rf"\b{_VOICE_ACT}\s+(\w+\s+){{0,2}}about\b", re.IGNORECASE)
_SOFTLY = re.compile(rf"\b{_VOICE_ACT}\s+(\w+\s+)?(softly|quietly)\b", re.IGNORECASE)
_LANGUAGE = re.compile(rf"\b{_VOICE_ACT}\s+(in\s+)?(English|French|Spanish|German|Chinese|Mandarin|Cantonese|"
                       r"Japanese|Korean|Italian|Hindi|Arabic|Russian|Portuguese)\b", re.IGNORECASE)
_SAYS = re.compile(r"\b(say|says|said|saying|shout\w*|yell\w*|whisper\w*|scream\w*|exclaim\w*|announc\w*|"
                   r"call\w* out|sing|sings|singing|sang|chant\w*|repeat\w*)\b", re.IGNORECASE)
# Things that carry text one reads: with them, quoted words are seen.
_TEXT_BEARER = re.compile(r"\b(signs?|signboard|banner|poster|text|written|writing|reads?|reading|label\w*|screen|"
                          r"caption\w*|subtitles?|display\w*|words?|letter\w*|shirt|t-shirt|mug|sticker|wall|board|"
                          r"billboard|neon|logo|plate|printed|painted|carved|engraved|card|book|page|paper|note)\b",
                          re.IGNORECASE)
_PLAYING_DEVICE = re.compile(r"\b(radio|stereo|jukebox|record player|speakers?|alarm|siren|sirens|phone|bells?)\s+"
                             r"(is\s+|are\s+)?(playing|ringing|rings|ring|sounding|going off|goes off|blaring)\b",
                             re.IGNORECASE)


def audio_reason(question: str) -> str:
    """Why the requirement asks about what is heard (the words that say so), or ``""`` when it asks
    about what is seen."""
    if not isinstance(question, str):
        return ""
    quoted = bool(_QUOTED.search(question))
    q = _QUOTED.sub(" ", question)
    seen = bool(_SEEN.search(q))
    m: re.Match[str] | None
    for m in _HEARD.finditer(q):
        if seen and _SOURCE_PERSON.fullmatch(m.group(0)):
            continue  # the narrator as a person in the picture
        return f"asks what is heard ({m.group(0)!r})"
    m = _NOISE.search(q)
    if m:
        return f"asks what is heard ({m.group(0)!r})"
    m = _TUNE.search(q)
    if m:
        return f"asks what is heard ({m.group(0)!r})"
    for m in _SOUND.finditer(q):
        word = m.group(0)
        if word.isupper() or (word[0] == "S" and q[:m.start()].strip()):
            continue  # a sign's capitals, or a name ("Puget Sound")
        if re.match(r"\s+asleep\b", q[m.end():]) or re.search(r"\bsafe and\s+$", q[:m.start()]):
            continue
        if not m.group(1) and _SOUND_SEEN_AFTER.match(q[m.end():]):
            continue  # a sound engineer, a sound system: seen
        return f"asks what is heard ({word!r})"
    for m in _MUSIC.finditer(q):
        if _MUSIC_SEEN_AFTER.match(q[m.end():]) or _MUSIC_AS_OBJECT.search(q[:m.start()]):
            continue  # a music studio, sheet music; someone seen playing music
        return "asks for music as heard ('music')"
    for m in _SONG.finditer(q):
        if _SONG_SUNG.search(q[:m.start()]):
            continue  # someone seen singing a song
        return "asks for a song as heard ('song')"
    m = _PLAYING_DEVICE.search(q)
    if m:
        return f"asks what a device sounds ({m.group(0)!r})"
    m = _TOPIC.search(q) or _LANGUAGE.search(q)
    if m:
        return f"asks what is said ({m.group(0)!r})"
    m = _SOFTLY.search(q)
    if m:
        return f"asks how it sounds ({m.group(0)!r})"
    if quoted and (m := _SAYS.search(q)) and not _TEXT_BEARER.search(q):
        return f"asks for the words spoken ({m.group(0)!r} and quoted words)"
    return ""
