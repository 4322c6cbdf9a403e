#!/usr/bin/env python
"""Write the bundled sample datasets used by lm-eval-evidential's offline tests and demos.

Every question is generated here from templates and word lists written for this project (the lists
are data, tools/sample_words.json, read at run time); no text comes from OpenBookQA, ARC,
CommonsenseQA or MMLU.  Only the *schemas* (field names, types, label conventions, split names)
mimic the Hugging Face hub datasets, so the task code that reads the real datasets reads these
files unchanged.

The output is deterministic: re-running the script reproduces every file byte for byte
(seeded ``random.Random`` instances, no set iteration, fixed JSON formatting).

Usage::

    python tools/make_sample_data.py                 # rewrite lm_eval_evidential/samples
    python tools/make_sample_data.py --out /tmp/x    # write elsewhere (the test compares bytes)
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import tempfile
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

SEED = 20240607
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "lm_eval_evidential" / "samples"
LETTERS = "ABCDE"
#: The word lists and templates every question is built from: data, read at run time (tools/sample_words.json;
#: JSON has no tuples, so a pair or a row of a table is a list there).
WORDS = json.loads((Path(__file__).resolve().parent / "sample_words.json").read_text(encoding="utf-8"))


class Item(NamedTuple):
    question: str
    correct: str
    distractors: tuple[str, ...]
    concept: str = ""


Generator = Callable[[random.Random], Item]

NAMES = WORDS["names"]


def _others(pool, correct):
    return tuple(x for x in pool if x != correct)


# --------------------------------------------------------------------------------------
# OpenBookQA-like: elementary science facts applied to everyday situations.
# --------------------------------------------------------------------------------------

_TOOLS = WORDS["tools"]
_TOOL_POOL = [t for t, _ in _TOOLS] + ["a magnifying glass", "a compass", "a microscope"]


def obqa_measure(rng):
    tool, nps = rng.choice(_TOOLS)
    np_ = rng.choice(nps)
    stem = rng.choice(
        [
            "To find {np}, a student should use",
            "Which tool would best measure {np}?",
            "A class wants to record {np}. Which instrument should they use?",
            "{name} needs to know {np}, so {name} reaches for",
        ]
    ).format(np=np_, name=rng.choice(NAMES))
    return Item(stem, tool, _others(_TOOL_POOL, tool))


_CONDUCTORS = WORDS["conductors"]
_INSULATORS = WORDS["insulators"]


def obqa_conductor(rng):
    name = rng.choice(NAMES)
    if rng.random() < 0.7:
        stem = rng.choice(
            [
                "{name} builds a circuit with a gap in it. The bulb will light if the gap is closed with",
                "Electricity would flow most easily through",
                "Which of these could {name} use to complete an electric circuit?",
                "{name} is testing objects with a battery and a bulb. The bulb glows when touching",
            ]
        ).format(name=name)
        return Item(stem, rng.choice(_CONDUCTORS), tuple(_INSULATORS))
    stem = rng.choice(
        [
            "Which of these would best keep electricity from flowing?",
            "{name} wants to cover a wire so it is safe to touch. The covering should be made of the same material as",
            "An electrical insulator, such as",
        ]
    ).format(name=name)
    return Item(stem, rng.choice(_INSULATORS), tuple(_CONDUCTORS))


_MAGNETIC = WORDS["magnetic"]
_NONMAGNETIC = WORDS["nonmagnetic"]


def obqa_magnet(rng):
    stem = rng.choice(
        [
            "A magnet will stick to",
            "A magnet held near a pile of objects would pick up",
            "{name} drags a strong magnet across a table. It most likely attracts",
            "Which object would a bar magnet attract?",
        ]
    ).format(name=rng.choice(NAMES))
    return Item(stem, rng.choice(_MAGNETIC), tuple(_NONMAGNETIC))


_ANIMAL_CLASS = WORDS["animal_class"]


def _article(word):
    return ("an " if word[0] in "aeiou" else "a ") + word


def obqa_animal_class(rng):
    cls = rng.choice(list(_ANIMAL_CLASS))
    animal = rng.choice(_ANIMAL_CLASS[cls])
    stem = rng.choice(
        [
            "{A} is a kind of",
            "Which group of animals does {a} belong to?",
            "Scientists would classify {a} as",
        ]
    ).format(A=_article(animal).capitalize(), a=_article(animal))
    return Item(stem, cls, _others(list(_ANIMAL_CLASS), cls))


_LIFE_CYCLE = WORDS["life_cycle"]


def obqa_life_cycle(rng):
    young, adult = rng.choice(_LIFE_CYCLE)
    stem = rng.choice(
        [
            "{A} will grow up to become",
            "As it grows, {a} changes into",
            "Over time, {a} develops into",
        ]
    ).format(A=_article(young).capitalize(), a=_article(young))
    return Item(stem, adult, tuple(a for _, a in _LIFE_CYCLE if a != adult))


_STATE_CHANGES = WORDS["state_changes"]
# (distractor, the change it names): a distractor naming the right change would be a second right answer.
_STATE_POOL = WORDS["state_pool"]


def obqa_state_change(rng):
    thing, change, kind = rng.choice(_STATE_CHANGES)
    stem = rng.choice(
        ["Over time, {t} will most likely", "What will most likely happen to {t}? It will", "{T} is expected to"]
    ).format(t=thing, T=thing[0].upper() + thing[1:])
    return Item(stem, change, tuple(x for x, k in _STATE_POOL if k != kind))


_ORGANS = WORDS["organs"]


def obqa_organ(rng):
    organ, job = rng.choice(_ORGANS)
    plural = organ.endswith("s")
    stem = rng.choice(
        [
            "The {o} {help} the body",
            "What is the main job of the {o}? To",
            "Without the {o}, a person could not",
        ]
    ).format(o=organ, help="help" if plural else "helps")
    return Item(stem, job, tuple(j for _, j in _ORGANS if j != job))


_PLANT_PARTS = WORDS["plant_parts"]


def obqa_plant(rng):
    part, job = rng.choice(_PLANT_PARTS)
    plant = rng.choice(
        ["a sunflower", "an apple tree", "a bean plant", "a rose bush", "a tomato plant", "a pumpkin vine"]
    )
    stem = rng.choice(["One job of the {p} of {pl} is to", "In {pl}, the main job of the {p} is to"]).format(
        p=part, pl=plant
    )
    return Item(stem, job, tuple(j for _, j in _PLANT_PARTS if j != job))


# (device, source, output, distractors): distractors are chosen per device so that none is
# also a large share of its output (a flashlight also makes electricity on the way to light).
_ENERGY = WORDS["energy"]


def obqa_energy(rng):
    device, src, out, wrong = rng.choice(_ENERGY)
    stem = rng.choice(
        [
            "{D} mainly changes {s} energy into",
            "When {d} is working, most of its {s} energy becomes",
            "The useful energy given off by {d} is mostly",
        ]
    ).format(D=device[0].upper() + device[1:], d=device, s=src)
    return Item(stem, out + " energy", tuple(f + " energy" for f in wrong))


_RENEWABLE = WORDS["renewable"]
_NONRENEWABLE = WORDS["nonrenewable"]


def obqa_renewable(rng):
    town = rng.choice(
        ["a small island", "a farm town", "a mountain village", "a desert city", "a seaside town", "a school district"]
    )
    if rng.random() < 0.6:
        stem = rng.choice(
            [
                "The power company of {t} wants an energy source that will not run out. It should use",
                "Which resource used by {t} can be replaced by nature?",
            ]
        ).format(t=town)
        return Item(stem, rng.choice(_RENEWABLE), tuple(_NONRENEWABLE))
    stem = f"Which fuel burned in {town} will eventually run out?"
    return Item(stem, rng.choice(_NONRENEWABLE), tuple(_RENEWABLE))


_MEAT_EATERS = WORDS["meat_eaters"]
_PLANT_EATERS = WORDS["plant_eaters"]
_NONFOOD = WORDS["nonfood"]


def obqa_food(rng):
    # Distractors come from the other diet so that none of them is also eaten by the animal.
    if rng.random() < 0.55:
        eater, food = rng.choice(_MEAT_EATERS)
        pool = [f for _, f in _PLANT_EATERS] + _NONFOOD
    else:
        eater, food = rng.choice(_PLANT_EATERS)
        pool = [f for _, f in _MEAT_EATERS] + _NONFOOD
    stem = rng.choice(
        [
            "{E} get the energy they need by eating",
            "In a food chain, {e} get energy from",
            "Most of the food of {e} comes from",
        ]
    ).format(E=eater.capitalize(), e=eater)
    return Item(stem, food, tuple(rng.sample(pool, 5)))


_ADAPT = WORDS["adapt"]
_MASS_OR_PLURAL = tuple(WORDS["mass_or_plural"])


def obqa_adaptation(rng):
    animal, feature, use = rng.choice(_ADAPT)
    plural = feature.endswith(("ears", "whiskers", "eyes", "feet", "quills", "talons", "teeth", "gills"))
    bare = feature.endswith(_MASS_OR_PLURAL)
    stem = rng.choice(
        ["The {f} of {a} most likely {help} it", "{A} uses its {f} to", "Why does {a} have {af}? To"]
    ).format(
        f=feature,
        a=_article(animal),
        A=_article(animal).capitalize(),
        help="help" if plural else "helps",
        af=feature if bare else _article(feature),
    )
    return Item(stem, use, tuple(u for _, _, u in _ADAPT if u != use))


_SPACE = WORDS["space"]
_SPACE_WRONG = WORDS["space_wrong"]


def obqa_space(rng):
    stems, right = rng.choice(_SPACE)
    stem = rng.choice(stems)
    # The Earth's spin also shapes the daily tides, so it is no distractor for the tide question.
    pool = [r for _, r in _SPACE if r != right and not (r.endswith("axis") and "oceans" in right)] + _SPACE_WRONG
    return Item(stem, right, tuple(rng.sample(pool, 5)))


_SURFACES_SMOOTH = WORDS["surfaces_smooth"]
_SURFACES_ROUGH = WORDS["surfaces_rough"]


def obqa_friction(rng):
    obj = rng.choice(["A toy car", "A rolling marble", "A hockey puck", "A wooden block", "A skateboard"])
    smooth = rng.choice(_SURFACES_SMOOTH)
    rough = rng.choice(_SURFACES_ROUGH)
    if rng.random() < 0.5:
        stem = f"{obj} is pushed with the same force on several surfaces. It will slide or roll farthest on"
        return Item(stem, smooth, tuple(_SURFACES_ROUGH))
    stem = f"{obj} will stop most quickly when it moves across"
    return Item(stem, rough, tuple(_SURFACES_SMOOTH))


_INSULATE = WORDS["insulate"]
_CONDUCT_HEAT = WORDS["conduct_heat"]


def obqa_heat(rng):
    what = rng.choice(
        [
            "a cup of cocoa warm",
            "a bowl of soup hot",
            "ice cream cold",
            "a snowball frozen",
            "a baked potato warm",
            "a jug of lemonade cool",
        ]
    )
    stem = rng.choice(
        ["Which would keep {w} the longest?", "To keep {w} during a long trip, it is best to use"]
    ).format(w=what)
    return Item(stem, rng.choice(_INSULATE), tuple(_CONDUCT_HEAT))


OBQA_GENERATORS: list[Generator] = [
    obqa_measure,
    obqa_conductor,
    obqa_magnet,
    obqa_animal_class,
    obqa_life_cycle,
    obqa_state_change,
    obqa_organ,
    obqa_plant,
    obqa_energy,
    obqa_renewable,
    obqa_food,
    obqa_adaptation,
    obqa_space,
    obqa_friction,
    obqa_heat,
]


# --------------------------------------------------------------------------------------
# ARC-like: grade-school earth science, chemistry, physics, genetics, method.
# --------------------------------------------------------------------------------------

_ROCKS = WORDS["rocks"]
_ROCK_ORIGIN = WORDS["rock_origin"]
_ROCK_WRONG = WORDS["rock_wrong"]


def arc_rock(rng):
    kind = rng.choice(list(_ROCKS))
    rock = rng.choice(_ROCKS[kind])
    if rng.random() < 0.5:
        stem = rng.choice(
            [
                "{R} is an example of which type of rock?",
                "A student finds a piece of {r}. Which rock group does it belong to?",
            ]
        ).format(R=rock.capitalize(), r=rock)
        return Item(stem, kind, tuple(k for k in _ROCKS if k != kind) + ("mineral", "fossil"))
    stem = rng.choice(["Which process forms a rock such as {r}?", "{R} forms mainly through the"]).format(
        R=rock.capitalize(), r=rock
    )
    right = _ROCK_ORIGIN[kind]
    return Item(stem, right, tuple(v for k, v in _ROCK_ORIGIN.items() if k != kind) + tuple(_ROCK_WRONG))


_SYMBOLS = WORDS["symbols"]


def arc_symbol(rng):
    el, sym, wrong = rng.choice(_SYMBOLS)
    if rng.random() < 0.6:
        stem = rng.choice(
            ["What is the chemical symbol for {e}?", "On the periodic table, {e} is represented by which symbol?"]
        ).format(e=el)
        return Item(stem, sym, tuple(wrong))
    stem = rng.choice(
        ["Which element has the chemical symbol {s}?", "A label on a sample reads {s}. Which element is in the sample?"]
    ).format(s=sym)
    return Item(stem, el, tuple(e for e, _, _ in _SYMBOLS if e != el))


_PLANETS = WORDS["planets"]
_PLANET_NAMES = WORDS["planet_names"]


def arc_planet(rng):
    fact, planet = rng.choice(_PLANETS)
    stem = rng.choice(["Which planet {f}?", "Of the planets in our solar system, which one {f}?"]).format(f=fact)
    return Item(stem, planet, _others(_PLANET_NAMES, planet))


_SYSTEMS = WORDS["systems"]
_SYSTEM_NAMES = WORDS["system_names"]


def arc_body_system(rng):
    organ, system = rng.choice(_SYSTEMS)
    stem = rng.choice(
        [
            "The {o} {be} part of which body system?",
            "A doctor is examining a patient's {o}. Which body system is the doctor studying?",
        ]
    ).format(o=organ, be="are" if organ.endswith("s") else "is")
    return Item(stem, f"the {system} system", tuple(f"the {s} system" for s in _SYSTEM_NAMES if s != system))


_UNITS = WORDS["units"]
_UNIT_NAMES = WORDS["unit_names"]


def arc_unit(rng):
    what, unit = rng.choice(_UNITS)
    stem = rng.choice(
        ["Which unit is best for measuring {w}?", "{n} is recording {w}. Which unit should be used?"]
    ).format(w=what, n=rng.choice(NAMES))
    return Item(stem, unit, _others(_UNIT_NAMES, unit))


_MACHINES = WORDS["machines"]
_MACHINE_NAMES = WORDS["machine_names"]


def arc_machine(rng):
    example, machine = rng.choice(_MACHINES)
    stem = rng.choice(["{E} is an example of which simple machine?", "Which simple machine is {e}?"]).format(
        E=example[0].upper() + example[1:], e=example
    )
    return Item(stem, _article(machine), tuple(_article(m) for m in _MACHINE_NAMES if m != machine))


_PERIODS = WORDS["periods"]
_PERIOD_WRONG = WORDS["period_wrong"]


def arc_period(rng):
    what, right = rng.choice(_PERIODS)
    stem = rng.choice(["About how long does it take for {w}?", "Which is closest to the time needed for {w}?"]).format(
        w=what
    )
    pool = [p for _, p in _PERIODS if p != right and p not in ("about 27 days", "about 29 days")]
    if right in ("about 27 days", "about 29 days"):
        pool = ["about 24 hours", "about 365 days"]
    return Item(stem, right, tuple(pool) + tuple(_PERIOD_WRONG))


_CHAINS = WORDS["chains"]


def arc_food_chain(rng):
    place, chain = rng.choice(_CHAINS)
    arrow = " -> ".join(chain)
    extra = ("mushrooms",)
    kind = rng.randrange(3)
    if kind == 0:
        stem = f"In the {place} food chain {arrow}, which organism is the producer?"
        return Item(stem, chain[0], tuple(chain[1:]) + extra)
    if kind == 1:
        stem = f"In the {place} food chain {arrow}, which organism is the top consumer?"
        return Item(stem, chain[3], tuple(chain[:3]) + extra)
    stem = (
        f"In the {place} food chain {arrow}, the number of {chain[1]} suddenly drops. "
        f"Which population will most likely decrease next?"
    )
    return Item(stem, chain[2], (chain[0], chain[3], "bacteria", "earthworms") + extra)


_AGENTS = WORDS["agents"]
_AGENT_NAMES = WORDS["agent_names"]


def arc_erosion(rng):
    land, agent = rng.choice(_AGENTS)
    stem = rng.choice(["Which most likely formed {l}?", "A geologist studies {l}. What most likely shaped it?"]).format(
        l=land
    )
    return Item(stem, agent, _others(_AGENT_NAMES, agent))


_CLASSIFY = WORDS["classify"]


def arc_classify(rng):
    sub, kind = rng.choice(_CLASSIFY)
    stem = rng.choice(
        ["{S} is best classified as", "How should a chemist classify {s}?", "A sample of {s} would be described as"]
    ).format(S=sub[0].upper() + sub[1:], s=sub)
    return Item(
        stem, kind, tuple(k for k in ("an element", "a compound", "a mixture") if k != kind) + ("a form of energy",)
    )


_PARTICLES = WORDS["particles"]


def arc_particles(rng):
    desc, state = rng.choice(_PARTICLES)
    sub, ref = rng.choice(
        [
            ("a substance", "the substance"),
            ("an unknown sample", "the sample"),
            ("a material sealed in a jar", "the material"),
            ("a sample of matter", "the sample"),
        ]
    )
    stem = f"The particles in {sub} are {desc}. In which state is {ref}?"
    return Item(
        stem, _article(state), tuple(_article(s) for s in ("solid", "liquid", "gas") if s != state) + ("a plasma",)
    )


_VEHICLES = WORDS["vehicles"]


def arc_speed(rng):
    t = rng.choice([2, 3, 4, 5, 6])
    v = rng.choice([10, 12, 15, 20, 25, 30, 40, 45, 50, 60, 80])
    d = v * t
    veh = rng.choice(_VEHICLES)
    stem = f"A {veh} travels {d} kilometers in {t} hours. What is its average speed?"
    wrong = [d * t, d + t, d - t, v + t, max(1, v - t), v * 2]
    wrong = list(dict.fromkeys(w for w in wrong if w != v))
    return Item(stem, f"{v} km/h", tuple(f"{w} km/h" for w in wrong))


def arc_density(rng):
    dens = rng.choice([2, 3, 4, 5, 6, 8])
    vol = rng.choice([4, 5, 10, 12, 15, 20])
    mass = dens * vol
    obj = rng.choice(["block", "stone", "metal cube", "plastic brick", "piece of wood"])
    stem = f"A {obj} has a mass of {mass} g and a volume of {vol} cm3. What is its density?"
    wrong = [mass * vol, mass - vol, mass + vol, dens + 1, dens * 2]
    wrong = list(dict.fromkeys(w for w in wrong if w != dens and w > 0))
    return Item(stem, f"{dens} g/cm3", tuple(f"{w} g/cm3" for w in wrong))


def arc_force(rng):
    a = rng.choice([2, 3, 4, 5, 6])
    m = rng.choice([2, 4, 5, 8, 10, 20])
    f = m * a
    stem = f"A net force of {f} N pushes a {m} kg cart. What is the acceleration of the cart?"
    wrong = [f * m, f + m, f - m, a + 2, a * 2]
    wrong = list(dict.fromkeys(w for w in wrong if w != a and w > 0))
    return Item(stem, f"{a} m/s2", tuple(f"{w} m/s2" for w in wrong))


_TRAITS = WORDS["traits"]
_CROSSES = WORDS["crosses"]


def arc_punnett(rng):
    org, dom, rec, letter = rng.choice(_TRAITS)
    p1, p2, n_dom, n_rec = rng.choice(_CROSSES)
    g1 = p1.replace("A", letter).replace("a", letter.lower())
    g2 = p2.replace("A", letter).replace("a", letter.lower())
    ask_dom = rng.random() < 0.5
    trait = dom if ask_dom else rec
    pct = 25 * (n_dom if ask_dom else n_rec)
    stem = (
        f"In {org}, the allele for {dom} ({letter}) is dominant over the allele for {rec} "
        f"({letter.lower()}). "
        f"If a {g1} parent is crossed with a {g2} parent, what percent of the offspring are expected "
        f"to have {trait}?"
    )
    return Item(stem, f"{pct}%", tuple(f"{p}%" for p in (0, 25, 50, 75, 100) if p != pct))


_EXPERIMENTS = WORDS["experiments"]


def arc_variables(rng):
    what, ind, dep, ctl = rng.choice(_EXPERIMENTS)
    name = rng.choice(NAMES)
    kind = rng.randrange(3)
    opts = [ind, dep, ctl, "the name of the student", "the day of the week"]
    if kind == 0:
        stem = f"{name} designs an experiment to test {what}. What is the independent variable?"
        right = ind
    elif kind == 1:
        stem = f"{name} designs an experiment to test {what}. What is the dependent variable?"
        right = dep
    else:
        stem = f"{name} is testing {what}. Which of these should be kept the same in every trial?"
        right = ctl
    return Item(stem, right, tuple(o for o in opts if o != right))


ARC_EASY_GENERATORS: list[Generator] = [
    arc_symbol,
    arc_planet,
    arc_rock,
    arc_body_system,
    arc_unit,
    arc_machine,
    arc_period,
    arc_food_chain,
]
ARC_CHALLENGE_GENERATORS: list[Generator] = [
    arc_speed,
    arc_density,
    arc_force,
    arc_punnett,
    arc_variables,
    arc_classify,
    arc_particles,
    arc_erosion,
    arc_food_chain,
    arc_rock,
]


# --------------------------------------------------------------------------------------
# CommonsenseQA-like: everyday places, motives, tools and consequences; always 5 options.
# --------------------------------------------------------------------------------------

_PLACES = WORDS["places"]


def csqa_place(rng):
    obj, place, wrong = rng.choice(_PLACES)
    name = rng.choice(NAMES)
    a_obj = _article(obj)
    stem = rng.choice(
        [
            "Where would you most likely find {a}?",
            "{n} saw {a}. Where was {n} most likely?",
            "{A} is usually kept in what place?",
            "If {n} is looking for {a}, where should {n} go?",
        ]
    ).format(a=a_obj, A=a_obj[0].upper() + a_obj[1:], n=name)
    return Item(stem, place, tuple(wrong), obj)


_FEELINGS = WORDS["feelings"]


def csqa_feeling(rng):
    state, contexts, right, wrong = rng.choice(_FEELINGS)
    name = rng.choice(NAMES)
    ctx = rng.choice(contexts)
    stem = rng.choice(
        [
            "{n} felt {s} after {c}. What did {n} probably want to do?",
            "After {c}, {n} was {s}. What would {n} likely do next?",
        ]
    ).format(n=name, s=state, c=ctx)
    return Item(stem, right, tuple(wrong), state)


_TOOL_USES = WORDS["tool_uses"]


def csqa_tool(rng):
    tool, use, wrong = rng.choice(_TOOL_USES)
    name = rng.choice(NAMES)
    a_tool = tool if tool.startswith("a ") else _article(tool)
    stem = rng.choice(
        [
            "What is {a} mostly used for?",
            "{n} picked up {a}. What was {n} most likely planning on?",
            "Why would someone bring {a}? For",
        ]
    ).format(a=a_tool, n=name)
    return Item(stem, use, tuple(wrong), tool.split()[-1])


_CONSEQUENCES = WORDS["consequences"]


def csqa_consequence(rng):
    action, concept, right, wrong = rng.choice(_CONSEQUENCES)
    name = rng.choice(NAMES)
    if right.startswith("it "):
        stem = rng.choice(["What will probably happen if you {a}?", "What will happen if {n} decides to {a}?"]).format(
            a=action, n=name
        )
    else:
        stem = rng.choice(
            ["What is likely to happen to you if you {a}?", "{n} plans to {a}. What will probably happen? {n} will"]
        ).format(a=action, n=name)
    return Item(stem, right, tuple(wrong), concept)


CSQA_GENERATORS: list[Generator] = [csqa_place, csqa_place, csqa_feeling, csqa_tool, csqa_consequence]


# --------------------------------------------------------------------------------------
# MMLU-like maths: computed questions with common-error distractors.
# --------------------------------------------------------------------------------------


def _numeric_distractors(rng, right, candidates, n=3):
    out = []
    for c in candidates:
        if c != right and c not in out:
            out.append(c)
    step = 1
    while len(out) < n:
        for c in (right + step, right - step):
            if c != right and c not in out and len(out) < n:
                out.append(c)
        step += 1
    return rng.sample(out[: max(n, 4)], n)


def _fmt(x):
    if isinstance(x, Fraction):
        return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return str(x)


def _poly(coeffs, var="x"):
    """Format a polynomial from (coefficient, power) pairs the way a textbook writes it."""
    terms = []
    for c, k in coeffs:
        if c == 0:
            continue
        mag = abs(c)
        body = ("" if mag == 1 and k else str(mag)) + (var if k else "") + (f"^{k}" if k > 1 else "")
        terms.append(("-" if c < 0 else "+", body))
    if not terms:
        return "0"
    sign, body = terms[0]
    out = ("-" if sign == "-" else "") + body
    for sign, body in terms[1:]:
        out += f" {sign} {body}"
    return out


def _phi(n):
    return sum(1 for k in range(1, n + 1) if math.gcd(k, n) == 1)


_AA_STATEMENTS = WORDS["aa_statements"]
_TF_CHOICES = WORDS["tf_choices"]


def mmlu_abstract_algebra(rng):
    kind = rng.randrange(7)
    if kind == 0:
        n = rng.choice([6, 8, 9, 10, 12, 14, 15, 16, 18, 20, 24, 30])
        a = rng.choice([k for k in range(2, n) if math.gcd(k, n) > 1])
        right = n // math.gcd(a, n)
        q = f"Find the order of the element {a} in the additive group Z_{n}."
        return right, q, _numeric_distractors(rng, right, [n, a, math.gcd(a, n), n - a])
    if kind == 1:
        n = rng.choice([7, 9, 10, 12, 15, 16, 18, 20, 21, 25, 27, 30])
        right = _phi(n)
        q = f"How many generators does the cyclic group Z_{n} have?"
        return right, q, _numeric_distractors(rng, right, [n, n - 1, n // 2, right + 2])
    if kind == 2:
        lengths = rng.choice([(2, 3), (3, 4), (2, 5), (4, 2), (2, 2, 3), (5, 3), (3, 3), (2, 4)])
        n = sum(lengths) + rng.choice([0, 1, 2])
        pts, cycles, nxt = list(range(1, n + 1)), [], 0
        for L in lengths:
            cycles.append("(" + " ".join(str(p) for p in pts[nxt : nxt + L]) + ")")
            nxt += L
        right = math.lcm(*lengths)
        q = f"What is the order of the permutation {''.join(cycles)} in S_{n}?"
        return right, q, _numeric_distractors(rng, right, [sum(lengths), math.prod(lengths) + 1, max(lengths), n])
    if kind == 3:
        p = rng.choice([7, 11, 13, 17, 19, 23])
        a = rng.randrange(2, p - 1)
        right = pow(a, -1, p)
        q = f"What is the multiplicative inverse of {a} in the field Z_{p}?"
        return right, q, _numeric_distractors(rng, right, [p - a, (a * a) % p, (right + 1) % p or 1, p - right])
    if kind == 4:
        good = rng.choice([3, 7, 11, 19, 23, 31, 43])
        bad = rng.sample([2, 5, 13, 17, 29, 37, 41], 3)
        q = "For which prime p is the polynomial x^2 + 1 irreducible over Z_p?"
        return f"p = {good}", q, [f"p = {b}" for b in bad]
    if kind == 5:
        a, b = rng.sample([2, 3, 5, 6, 7, 10, 11], 2)
        which = rng.randrange(3)
        if which == 0:
            q, right, wrong = f"Find the degree of the field extension Q(sqrt({a}), sqrt({b})) over Q.", 4, [2, 6, 8]
        elif which == 1:
            q = f"Find the degree of the field extension Q(sqrt({a}), cuberoot({b})) over Q."
            right, wrong = 6, [3, 5, 9]
        else:
            q, right, wrong = f"Find the degree of the field extension Q(cuberoot({a})) over Q.", 3, [2, 6, 9]
        return right, q, wrong
    (s1, t1), (s2, t2) = rng.sample(_AA_STATEMENTS, 2)
    q = f"Statement 1 | {s1} Statement 2 | {s2}"
    right = f"{'True' if t1 else 'False'}, {'True' if t2 else 'False'}"
    return right, q, [c for c in _TF_CHOICES if c != right]


def mmlu_college_mathematics(rng):
    kind = rng.randrange(6)
    if kind == 0:
        a, b, c = rng.randrange(1, 5), rng.randrange(-4, 6), rng.randrange(-5, 6)
        x0 = rng.randrange(1, 4)
        right = 3 * a * x0**2 + 2 * b * x0 + c
        q = f"If f(x) = {_poly([(a, 3), (b, 2), (c, 1)])}, what is f'({x0})?"
        return (
            right,
            q,
            _numeric_distractors(rng, right, [a * x0**3 + b * x0**2 + c * x0, 3 * a * x0 + 2 * b + c, right + 2 * b]),
        )
    if kind == 1:
        a, k = rng.randrange(1, 4), rng.randrange(1, 4)
        right = Fraction(a * k**3, 3) + Fraction(k**2, 1)
        q = f"Evaluate the integral of ({_poly([(a, 2), (2, 1)])}) dx from x = 0 to x = {k}."
        return (
            _fmt(right),
            q,
            [
                _fmt(v)
                for v in _numeric_distractors(
                    rng, right, [Fraction(a * k**3) + k**2, Fraction(a * k**2, 2) + k, right + 1]
                )
            ],
        )
    if kind == 2:
        m = [[rng.randrange(-3, 7) for _ in range(2)] for _ in range(2)]
        right = m[0][0] * m[1][1] - m[0][1] * m[1][0]
        q = f"What is the determinant of the matrix [[{m[0][0]}, {m[0][1]}], [{m[1][0]}, {m[1][1]}]]?"
        return (
            right,
            q,
            _numeric_distractors(rng, right, [m[0][0] * m[1][1] + m[0][1] * m[1][0], m[0][0] + m[1][1], -right]),
        )
    if kind == 3:
        a, b = rng.sample(range(1, 10), 2)
        right = Fraction(a, b)
        q = f"What is the limit of sin({_poly([(a, 1)])})/({_poly([(b, 1)])}) as x approaches 0?".replace("/(x)", "/x")
        wrong = _numeric_distractors(rng, right, [Fraction(b, a), Fraction(0), Fraction(1)])
        return _fmt(right), q, [_fmt(v) for v in wrong]
    if kind == 4:
        n, k = rng.randrange(5, 11), rng.randrange(2, 5)
        right = math.comb(n, k)
        q = f"In how many ways can a committee of {k} people be chosen from a group of {n} people?"
        return right, q, _numeric_distractors(rng, right, [math.perm(n, k), n * k, math.comb(n, k - 1)])
    r = rng.randrange(2, 9)
    right = Fraction(r, r - 1)
    q = f"What is the sum of the infinite series 1 + 1/{r} + 1/{r}^2 + 1/{r}^3 + ...?"
    wrong = _numeric_distractors(rng, right, [Fraction(1, r - 1), Fraction(r - 1, r), Fraction(r + 1, r)])
    return _fmt(right), q, [_fmt(v) for v in wrong]


def mmlu_high_school_mathematics(rng):
    kind = rng.randrange(7)
    if kind == 0:
        a, x = rng.randrange(2, 10), rng.randrange(-6, 12)
        b = rng.randrange(-15, 16)
        c = a * x + b
        q = f"If {_poly([(a, 1), (b, 0)])} = {c}, what is the value of x?"
        return x, q, _numeric_distractors(rng, x, [c - b, (c + b) // a if (c + b) % a == 0 else x + 3, -x])
    if kind == 1:
        x1, y1 = rng.randrange(-5, 6), rng.randrange(-5, 6)
        dx, dy = rng.choice([1, 2, 3, 4]), rng.randrange(-8, 9)
        right = Fraction(dy, dx)
        q = f"What is the slope of the line through the points ({x1}, {y1}) and ({x1 + dx}, {y1 + dy})?"
        wrong = [Fraction(dx, dy) if dy else Fraction(dx), -right, right + 1]
        return _fmt(right), q, [_fmt(v) for v in _numeric_distractors(rng, right, wrong)]
    if kind == 2:
        r1, r2 = rng.sample(range(-6, 9), 2)
        s, p = r1 + r2, r1 * r2
        q = f"What is the sum of the roots of {_poly([(1, 2), (-s, 1), (p, 0)])} = 0?"
        return s, q, _numeric_distractors(rng, s, [-s, p, s + 1])
    if kind == 3:
        pct, n = rng.choice([10, 15, 20, 25, 30, 40, 60, 75]), rng.choice([40, 60, 80, 120, 200, 240, 300])
        right = Fraction(pct * n, 100)
        q = f"What is {pct}% of {n}?"
        wrong = _numeric_distractors(rng, right, [right / 10, right * 10, right + pct])
        return _fmt(right), q, [_fmt(v) for v in wrong]
    if kind == 4:
        r, b = rng.randrange(2, 9), rng.randrange(2, 9)
        color = rng.choice(["red", "blue"])
        right = Fraction(r if color == "red" else b, r + b)
        q = (
            f"A bag contains {r} red marbles and {b} blue marbles. If one marble is drawn at random, "
            f"what is the probability that it is {color}?"
        )
        wrong = [
            Fraction(b if color == "red" else r, r + b),
            Fraction(r if color == "red" else b, max(r, b) + 1),
            Fraction(1, r + b),
        ]
        return _fmt(right), q, [_fmt(v) for v in _numeric_distractors(rng, right, wrong)]
    if kind == 5:
        a1, d, n = rng.randrange(-5, 10), rng.randrange(2, 7), rng.randrange(8, 25)
        right = a1 + (n - 1) * d
        q = f"An arithmetic sequence has first term {a1} and common difference {d}. What is term number {n}?"
        return right, q, _numeric_distractors(rng, right, [a1 + n * d, n * d, right - a1])
    k = rng.randrange(1, 6)
    a, b = rng.choice([(3, 4), (5, 12), (8, 15), (7, 24)])
    x1, y1 = rng.randrange(-4, 5), rng.randrange(-4, 5)
    right = k * int(math.hypot(a, b))
    q = f"What is the distance between the points ({x1}, {y1}) and ({x1 + k * a}, {y1 + k * b})?"
    return right, q, _numeric_distractors(rng, right, [k * (a + b), k * a * b, k * abs(b - a)])


MMLU_GENERATORS = {
    "abstract_algebra": mmlu_abstract_algebra,
    "college_mathematics": mmlu_college_mathematics,
    "high_school_mathematics": mmlu_high_school_mathematics,
}


# --------------------------------------------------------------------------------------
# Assembly.
# --------------------------------------------------------------------------------------

MAX_STEM_REPEATS = 2


def _draw(rng, generators, n, min_distractors, seen):
    """Draw ``n`` items, new to ``seen``, with enough distractors.

    ``seen`` maps a question stem to the answers already used with it: a stem may come back
    with a different answer (the real datasets repeat generic stems too), at most
    ``MAX_STEM_REPEATS`` times.
    """
    out = []
    attempts = 0
    while len(out) < n:
        attempts += 1
        if attempts > 200 * n + 1000:
            raise RuntimeError(f"could not draw {n} unique questions; the templates are too narrow")
        item = rng.choice(generators)(rng)
        used = seen.setdefault(item.question, [])
        if item.correct in used or len(used) >= MAX_STEM_REPEATS:
            continue
        if len(set(item.distractors) - {item.correct}) < min_distractors:
            continue
        used.append(item.correct)
        out.append(item)
    return out


def _options(rng, item, k, pos):
    pool = list(dict.fromkeys(d for d in item.distractors if d != item.correct))
    opts = rng.sample(pool, k - 1)
    opts.insert(pos, item.correct)
    return opts


def _balanced_positions(rng, n, k):
    pos = [i % k for i in range(n)]
    rng.shuffle(pos)
    return pos


def make_openbookqa(rng):
    seen = {}
    items = _draw(rng, OBQA_GENERATORS, 420, 3, seen)
    splits = {"train": items[:240], "validation": items[240:300], "test": items[300:]}
    out = {}
    for split, its in splits.items():
        positions = _balanced_positions(rng, len(its), 4)
        recs = []
        for i, (it, pos) in enumerate(zip(its, positions)):
            recs.append(
                {
                    "id": f"syn-{split[:3]}-{i + 1:04d}",
                    "question_stem": it.question,
                    "choices": {"text": _options(rng, it, 4, pos), "label": list(LETTERS[:4])},
                    "answerKey": LETTERS[pos],
                }
            )
        out[split] = recs
    return out


def make_arc(rng, generators, prefix, layout):
    """``layout`` lists (count, n_options, numeric_labels) blocks; they are shuffled together."""
    plan = [(k, numeric) for count, k, numeric in layout for _ in range(count)]
    rng.shuffle(plan)
    seen = {}
    recs = []
    for i, (k, numeric) in enumerate(plan):
        it = _draw(rng, generators, 1, k - 1, seen)[0]
        pos = rng.randrange(k)
        labels = [str(j + 1) for j in range(k)] if numeric else list(LETTERS[:k])
        recs.append(
            {
                "id": f"{prefix}_{i + 1:04d}",
                "question": it.question,
                "choices": {"text": _options(rng, it, k, pos), "label": labels},
                "answerKey": labels[pos],
            }
        )
    return recs


def make_commonsense_qa(rng):
    seen = {}
    out = {}
    for split, n in (("train", 40), ("validation", 100)):
        items = _draw(rng, CSQA_GENERATORS, n, 4, seen)
        positions = _balanced_positions(rng, n, 5)
        recs = []
        for it, pos in zip(items, positions):
            digest = hashlib.md5(f"{split}|{it.question}|{it.correct}".encode()).hexdigest()
            recs.append(
                {
                    "id": digest,
                    "question": it.question,
                    "question_concept": it.concept,
                    "choices": {"label": list(LETTERS), "text": _options(rng, it, 5, pos)},
                    "answerKey": LETTERS[pos],
                }
            )
        out[split] = recs
    return out


def make_mmlu(rng, subject, n=25):
    gen = MMLU_GENERATORS[subject]
    seen = {}
    positions = _balanced_positions(rng, n, 4)
    recs = []
    attempts = 0
    while len(recs) < n:
        attempts += 1
        if attempts > 5000:
            raise RuntimeError(f"could not draw {n} unique {subject} questions")
        right, q, wrong = gen(rng)
        right = _fmt(right)
        wrong = [_fmt(w) for w in wrong]
        used = seen.setdefault(q, [])
        if right in used or len(used) >= MAX_STEM_REPEATS or len(set(wrong)) != 3 or right in wrong:
            continue
        used.append(right)
        pos = positions[len(recs)]
        choices = list(wrong)
        rng.shuffle(choices)
        choices.insert(pos, right)
        recs.append({"question": q, "subject": subject, "choices": choices, "answer": pos})
    return recs


def build_all(seed=SEED):
    """Return {relative path: list of records} for every bundled file."""
    rng = random.Random(seed)
    files = {}
    for split, recs in make_openbookqa(random.Random(rng.random())).items():
        files[f"allenai/openbookqa/main/{split}.jsonl"] = recs
    # (count, number of options, numeric labels): mostly 4 letters, as in the real ARC test sets.
    files["allenai/ai2_arc/ARC-Challenge/test.jsonl"] = make_arc(
        random.Random(rng.random()),
        ARC_CHALLENGE_GENERATORS,
        "SynthARC-C",
        [(61, 4, False), (6, 3, False), (5, 5, False), (7, 4, True), (1, 3, True)],
    )
    files["allenai/ai2_arc/ARC-Easy/test.jsonl"] = make_arc(
        random.Random(rng.random()),
        ARC_EASY_GENERATORS,
        "SynthARC-E",
        [(62, 4, False), (5, 3, False), (6, 5, False), (6, 4, True), (1, 3, True)],
    )
    for split, recs in make_commonsense_qa(random.Random(rng.random())).items():
        files[f"tau/commonsense_qa/default/{split}.jsonl"] = recs
    for subject in MMLU_GENERATORS:
        files[f"cais/mmlu/{subject}/test.jsonl"] = make_mmlu(random.Random(rng.random()), subject)
    return files


README = """\
# Bundled sample data

These JSON Lines files were generated for lm-eval-evidential by `tools/make_sample_data.py`
(deterministic; re-running it reproduces them byte for byte). The questions are written from
templates and word lists in that script. They are **not** taken from OpenBookQA, ARC,
CommonsenseQA or MMLU and are not a substitute for them: they only mimic those datasets'
Hugging Face schemas (field names, types, label conventions, split names) so that the
evaluation code can be exercised offline.

Layout: `<hub id>/<config>/<split>.jsonl`, one record per line.

| file | records |
|------|--------:|
{table}
"""


def _write_atomic(path: Path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; package data must be world-readable
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_all(out_dir, seed=SEED):
    """Write every sample file (and the README) under ``out_dir``; return the written paths."""
    out_dir = Path(out_dir)
    files = build_all(seed)
    written = []
    for rel, recs in files.items():
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in recs)
        path = out_dir / rel
        _write_atomic(path, text.encode("utf-8"))
        written.append(path)
    table = "\n".join(f"| `{rel}` | {len(recs)} |" for rel, recs in files.items())
    readme = out_dir / "README.md"
    _write_atomic(readme, README.format(table=table).encode("utf-8"))
    written.append(readme)
    return written


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="output folder (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args(argv)
    for path in write_all(args.out, args.seed):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
