"""A synthetic multi-session chat history generator: a stand-in for LongMemEval-like benchmarks.

Each history is one user's chat memory: `sessions` sessions of `turns` user turns each. Most
turns join two or three everyday clauses (work, food, family, weather...) drawn without
repetition from a pool; a few facts per history are each stated once, in passing, inside a
long turn (the evidence), and each fact's topic also appears in several distractor turns in
other sessions (the same subject without the fact: a dog next door, bread that came out
flat). A fact's question uses the words the user used when stating it ("What breed is the
puppy I adopted?"), as such benchmarks' questions mostly do, so keyword search finds it and
a model that ranks by topic alone may put a distractor first. Seeded and deterministic;
the text is written here (no benchmark data).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = ["FACTS", "Fact", "History", "histories"]


@dataclass(frozen=True)
class Fact:
    question: str
    evidence: str  # with {v}: the value, drawn from `values`
    values: tuple[str, ...]
    distractors: tuple[str, ...]


FACTS: tuple[Fact, ...] = (
    Fact("What breed is the puppy I adopted?", "we finally adopted a puppy last weekend, a {v} from the shelter",
         ("beagle", "border collie", "shiba inu", "corgi", "dachshund"),
         ("the dog next door barks all night and I barely slept", "I walked my neighbour's dog around the park",
          "we're thinking about pet insurance for the cat", "my kids keep begging for a hamster")),
    Fact("What was the name of the bakery I found near the office?",
         "I found a tiny bakery called {v} two streets from the office",
         ("Crumb & Co", "Little Loaf", "Flour Child", "Golden Crust", "The Rolling Pin"),
         ("my homemade bread came out flat again", "the cafe at work has surprisingly good croissants",
          "we had brunch somewhere with amazing pastries", "I've been craving cinnamon buns all week")),
    Fact("How far was my longest training run?", "my longest training run so far was {v} along the river",
         ("18 kilometres", "21 kilometres", "14 miles", "25 kilometres", "12 miles"),
         ("I signed up for a marathon next spring", "my trainers are completely worn out",
          "I jogged around the lake before work", "my knee has been sore after exercise")),
    Fact("Which language am I learning on my commute?", "I've been learning {v} on my commute with an app",
         ("Portuguese", "Japanese", "Italian", "Korean", "Dutch"),
         ("my commute got longer since they closed the bridge", "I'd love to take an evening class in something new",
          "a coworker of mine speaks four languages", "we watched a foreign film with subtitles")),
    Fact("What did I name my sourdough starter?", "I named my sourdough starter {v}, which makes my partner laugh",
         ("Doughlores", "Clint Yeastwood", "Bread Pitt", "Gluten Morgan", "Yeasty Boy"),
         ("baking bread on Sundays has become my ritual", "I bought a new stand mixer on sale",
          "the pizza dough needed more yeast", "my loaf finally had a proper crust")),
    Fact("Where did my sister move for her new job?", "my sister moved to {v} for her new job",
         ("Lisbon", "Toronto", "Melbourne", "Edinburgh", "Denver"),
         ("my brother switched careers twice this year", "I helped a friend pack boxes all weekend",
          "my parents visited from out of town", "my cousin is relocating abroad next year")),
    Fact("What colour did we paint the living room?", "we painted the living room {v} over the long weekend",
         ("sage green", "navy blue", "terracotta", "pale yellow", "charcoal grey"),
         ("we bought a new sofa for the lounge", "the kitchen really needs new cabinets",
          "I hung some family photos in the hallway", "we're redecorating the guest bedroom soon")),
    Fact("What board game did we play at game night?", "at game night we played {v} until midnight",
         ("Catan", "Ticket to Ride", "Wingspan", "Carcassonne", "Azul"),
         ("I love puzzle evenings with friends", "we had a movie marathon on Friday",
          "my nephew is glued to video games all day", "we lost badly at pub trivia")),
    Fact("What's the name of my new manager?", "my new manager, {v}, seems really organised",
         ("Priya", "Tomasz", "Grace", "Malik", "Helena"),
         ("the team had a painfully long planning meeting", "my boss is retiring next month",
          "HR sent around another engagement survey", "a colleague got promoted to team lead")),
    Fact("Which car did I test drive?", "I test drove a {v} on Saturday and liked it more than expected",
         ("Honda Civic", "Tesla Model 3", "Mazda CX-5", "Volkswagen Golf", "Kia Niro"),
         ("our old hatchback needs new tyres", "the dealership keeps calling me", "I'm comparing electric vehicles",
          "parking in the city has become impossible")),
    Fact("Which plant did I repot?", "I repotted my {v} because its roots were poking out",
         ("monstera", "fiddle leaf fig", "snake plant", "pothos", "peace lily"),
         ("the garden tomatoes are finally ripening", "I bought herbs for the balcony",
          "my houseplants get too little sun in winter", "the orchid my aunt gave me is blooming")),
    Fact("Which book did my book club pick this month?", "my book club picked {v} this month",
         ("Project Hail Mary", "The Overstory", "Pachinko", "Circe", "Educated"),
         ("I'm reading a thriller before bed", "I returned a stack of novels to the library",
          "my e-reader's battery died on the train", "I started listening to a memoir")),
    Fact("What instrument is my daughter learning?", "my daughter started learning the {v} at school",
         ("cello", "trumpet", "violin", "clarinet", "drums"),
         ("we went to a concert in the park", "my son is obsessed with football now",
          "we listen to jazz records on weekends", "the school recital is next Thursday")),
    Fact("Where did we go camping?", "we went camping at {v} and it rained the whole time",
         ("Lake Tahoe", "the Lake District", "Yosemite", "Banff", "the Black Forest"),
         ("I bought a new tent and sleeping bag", "my hiking boots gave me blisters",
          "we're planning a beach holiday for the summer", "the kids loved roasting marshmallows")),
    Fact("What am I allergic to, according to the doctor?", "the doctor found I'm allergic to {v}",
         ("shellfish", "birch pollen", "cats", "penicillin", "peanuts"),
         ("I finally had my annual check-up", "my dentist appointment got moved again",
          "I've been sneezing a lot this spring", "the pharmacy was out of my prescription")),
    Fact("What's the podcast I keep recommending?", "I keep recommending a podcast called {v} to everyone",
         ("Hidden Brain", "Radiolab", "99% Invisible", "Reply All", "Planet Money"),
         ("I listen to audiobooks while cleaning", "the radio in my car broke",
          "I started writing a small newsletter", "my headphones died mid-flight")),
)

CLAUSES: tuple[str, ...] = (
    "work has been hectic this week", "I finally cleaned out the garage", "the weather turned cold overnight",
    "I made a big pot of chili", "my mum called for an hour", "I fixed the leaking tap myself",
    "the neighbours are renovating again", "I tried a new yoga class", "our internet was down all morning",
    "I finished a jigsaw puzzle", "traffic was terrible on the way home", "I organised my wardrobe",
    "we ordered takeaway twice", "my phone screen cracked", "I'm trying to drink more water",
    "I watched a documentary about octopuses", "the power went out during dinner", "I planned next month's budget",
    "I got a haircut I'm unsure about", "my friend had a baby", "we celebrated my dad's birthday",
    "I reorganised my desk", "I volunteered at the food bank", "my laptop keeps overheating",
    "I went to a farmers market", "I've been sleeping badly", "it snowed for the first time",
    "I cooked a curry from scratch", "I caught up on emails", "I booked a dentist appointment",
    "the washing machine broke", "I went for a long walk", "my team shipped a big release",
    "I tried meditating before bed", "we had friends over for dinner", "I bought a new winter coat",
    "I spent the afternoon doing laundry", "my grandmother turned ninety", "the train was cancelled",
    "I made pancakes on Sunday", "I'm trying to cut back on coffee", "I signed up for a pottery workshop",
    "we repaired the fence", "I cleaned the windows", "the heating is finally fixed",
    "I got a parking ticket", "I learned to make dumplings", "my friend moved in nearby",
    "we went to a wedding", "I rearranged the furniture", "it's been raining for days",
    "I renewed my passport", "I sorted old photos", "I tried a new hair salon",
    "I went to the cinema alone", "I started a gratitude journal", "my boots leak in the rain",
    "I bought groceries for the week", "I spent Saturday at my parents' place", "I repaired my bike",
    "I watched the football with friends", "I deleted social media for a week", "I baked cookies for the office",
    "we adopted a new routine for mornings", "I cleared out my inbox", "the printer jammed again",
    "I visited a museum", "I tried an escape room", "my friend lent me a drill",
    "I volunteered to organise the party", "I finished my tax return", "I bought a bike helmet",
    "my flatmate got a new job", "I cooked for my in-laws", "I went swimming after work",
    "I backed up my computer", "I got stuck in a lift", "I fixed the squeaky door",
    "I went to a street food festival", "I tidied the balcony", "my package got lost",
)
OPENERS = ("Hi!", "Hey,", "Quick update:", "So,", "Okay,", "Morning!", "Hello again,", "Well,")


@dataclass(frozen=True)
class History:
    """One user's turns (key, text) in session order, and its questions (text, evidence key)."""

    name: str
    turns: tuple[tuple[str, str], ...]
    questions: tuple[tuple[str, str], ...]


def histories(n: int = 8, *, sessions: int = 50, turns: int = 5, facts: int = 10, seed: int = 20) -> list[History]:
    """`n` histories of `sessions` × `turns` user turns, each with `facts` facts asked about."""
    rng = random.Random(seed)
    out: list[History] = []
    for h in range(n):
        chosen = rng.sample(FACTS, facts)
        slots = [(s, t) for s in range(sessions) for t in range(turns)]
        special = rng.sample(slots, facts * 5)  # one evidence and up to four distractors per fact
        plan: dict[tuple[int, int], str] = {}
        questions: list[tuple[str, str]] = []
        for i, fact in enumerate(chosen):
            ev_slot = special[i * 5]
            plan[ev_slot] = fact.evidence.format(v=rng.choice(fact.values))
            questions.append((fact.question, f"h{h}-s{ev_slot[0]}-t{ev_slot[1]}"))
            for j, d in enumerate(fact.distractors):
                plan[special[i * 5 + 1 + j]] = d
        texts: list[tuple[str, str]] = []
        used: set[tuple[str, ...]] = set()
        for slot in slots:
            while True:
                parts = tuple(rng.sample(CLAUSES, rng.choice((2, 3))))
                if parts not in used:
                    used.add(parts)
                    break
            clauses = list(parts)
            if slot in plan:
                clauses.insert(rng.randrange(len(clauses) + 1), plan[slot])
            text = f"{rng.choice(OPENERS)} " + ", and ".join(clauses) + "."
            texts.append((f"h{h}-s{slot[0]}-t{slot[1]}", text[0].upper() + text[1:]))
        out.append(History(f"chat-{h}", tuple(texts), tuple(questions)))
    return out
