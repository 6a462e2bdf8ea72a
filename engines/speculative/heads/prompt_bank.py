"""Templated training prompts: everyday requests built from a few lists, and requests about
the paragraphs of the shipped texts (training_data.py lists what is trained on; this file
only builds the prompts).

    topic prompts      every (template, subject) pair of TOPIC_TEMPLATES × SUBJECTS, the
                       templates cycling so each subject meets TEMPLATES_PER_SUBJECT of them
    paragraph prompts  each paragraph of the shipped texts (80–700 characters) under
                       PARAGRAPH_TEMPLATES in turn, one template per paragraph

The subjects stay clear of what the speculative lab's bench prompts ask (ferries and their
captains, a rainy day at home, names for a pet, the colour of the sky): the head is judged on
those and must not have seen them in substance. tests/engines/speculative/heads/
test_training_data.py checks every prompt against `BENCH_WORDS`.
"""

from __future__ import annotations

import re

SUBJECTS = (
    "baking sourdough bread", "growing tomatoes on a balcony", "learning a second language",
    "saving for a first home", "training for a 10 km run", "keeping a sourdough starter alive",
    "repairing a leaking tap", "choosing a laptop for university", "planning a camping trip",
    "brewing good coffee at home", "writing a clear email", "preparing for a job interview",
    "composting kitchen scraps", "looking after a goldfish", "teaching a dog to sit",
    "reducing screen time", "cooking rice without a rice cooker", "painting a small room",
    "starting a vegetable garden", "making a monthly budget", "learning to swim as an adult",
    "organising a small wedding", "storing winter clothes", "fixing a flat bicycle tyre",
    "reading more books", "improving handwriting", "taking better phone photos",
    "keeping a journal", "hosting a dinner party", "choosing running shoes",
    "backing up family photos", "making a website for a small shop", "learning Python",
    "understanding how a bank loan works", "insulating an old house", "planting a tree",
    "writing a short story", "public speaking", "meditation for beginners",
    "cleaning a cast-iron pan", "moving to a new city", "making friends as an adult",
    "studying for an exam", "using a spreadsheet", "how solar panels work",
    "how a refrigerator works", "how bees make honey", "how tides work", "how a bill becomes law",
    "how the internet routes a message", "how a compass works", "why leaves change colour",
    "how volcanoes form", "how electric cars charge", "how a camera lens focuses",
    "the history of the printing press", "the water cycle", "how the heart pumps blood",
    "how to knit a scarf", "choosing a houseplant for a bright window",
    "ironing a shirt", "sharpening a kitchen knife", "making pancakes", "baking a birthday cake",
    "making soup from leftovers", "packing a lunch for work", "washing wool jumpers",
    "getting rid of fruit flies", "descaling a kettle", "hanging a picture on a wall",
    "assembling flat-pack furniture", "changing a car tyre", "checking a car's oil",
    "jump-starting a car battery", "riding a bicycle in city traffic", "learning to juggle",
    "practising the piano", "drawing a portrait", "writing a haiku", "learning chess openings",
    "solving a sudoku", "building a birdhouse", "keeping chickens", "pruning roses",
    "mowing a lawn", "making jam", "pickling vegetables", "fermenting kimchi",
    "cooking pasta for a crowd", "grilling vegetables", "writing a cover letter",
    "asking for a pay rise", "negotiating the price of a used car", "running a team meeting",
    "giving feedback to a colleague", "managing a small project", "working from home",
    "learning to type faster", "choosing a password manager", "spotting a phishing email",
    "setting up a home wifi network", "speeding up an old computer", "learning SQL",
    "writing unit tests", "using version control", "how a microwave oven heats food",
    "how a thermostat works", "how vaccines train the immune system", "how glaciers move",
    "how earthquakes are measured", "how plants make food from light", "how a lock and key work",
    "how a piano makes sound", "how bread rises", "how a battery stores energy",
    "how airplanes stay in the air", "how the moon changes shape", "how recycling is sorted",
)

TOPIC_TEMPLATES = (
    "Give me five practical tips for {s}.",
    "Explain {s} to a complete beginner in a short paragraph.",
    "What are the most common mistakes people make with {s}, and how can they avoid them?",
    "Write a step-by-step guide to {s}.",
    "What are the pros and cons of {s}? Answer in a short list.",
    "I have one free hour. How should I get started with {s}?",
    "Write a short, friendly paragraph encouraging a friend who is nervous about {s}.",
    "Answer briefly: what is the single most important thing to know about {s}?",
    "Write a short story (about 100 words) in which a character learns about {s}.",
    "Make a checklist for {s}.",
)
TEMPLATES_PER_SUBJECT = 8

PARAGRAPH_TEMPLATES = (
    "Summarise this passage in two sentences:\n\n{p}",
    "Continue this text for a few more sentences, in the same style:\n\n{p}",
    "Write three questions a reader might ask about this passage, then answer each:\n\n{p}",
    "Explain this passage in simple words:\n\n{p}",
    "What is the main idea of the following text?\n\n{p}",
)
PARAGRAPH_CHARS = (80, 700)
BENCH_WORDS = ("ferry", "ferries", "captain", "kitten", "kittens", "cat", "cats", "sky", "raining",
               "rainy")
"""Words of the bench's open prompts' subjects: no built prompt holds one (a paragraph that
does is left out; ferry.txt is not asked about at all)."""
_BENCH_RE = re.compile(r"\b(" + "|".join(BENCH_WORDS) + r")\b", re.IGNORECASE)


def mentions_bench_subject(text: str) -> bool:
    return _BENCH_RE.search(text) is not None


def topic_prompts() -> tuple[str, ...]:
    out = []
    for i, s in enumerate(SUBJECTS):
        for j in range(TEMPLATES_PER_SUBJECT):
            out.append(TOPIC_TEMPLATES[(i + j) % len(TOPIC_TEMPLATES)].format(s=s))
    return tuple(out)


def paragraphs(text: str) -> list[str]:
    """The text's blank-line-separated paragraphs of PARAGRAPH_CHARS characters (whitespace
    inside one joined)."""
    lo, hi = PARAGRAPH_CHARS
    paras = (" ".join(p.split()) for p in text.split("\n\n"))
    return [p for p in paras if lo <= len(p) <= hi and not mentions_bench_subject(p)]


def paragraph_prompts(texts: dict[str, str]) -> tuple[str, ...]:
    """One request per paragraph of `texts` (name -> text), the templates in turn."""
    out = []
    for name in sorted(texts):
        for p in paragraphs(texts[name]):
            out.append(PARAGRAPH_TEMPLATES[len(out) % len(PARAGRAPH_TEMPLATES)].format(p=p))
    return tuple(out)
