"""Session titles (random cities, reference §4.7) and new-branch names (reference §4.5)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator, Set

from openagents.domain import validation

CITIES: tuple[str, ...] = (
    # Africa (22)
    "Abidjan", "Accra", "Addis Ababa", "Algiers", "Antananarivo", "Cairo", "Cape Town",
    "Casablanca", "Dakar", "Dar es Salaam", "Johannesburg", "Kampala", "Kigali", "Kinshasa",
    "Lagos", "Luanda", "Lusaka", "Maputo", "Marrakech", "Nairobi", "Tunis", "Windhoek",
    # Asia (48)
    "Almaty", "Amman", "Baku", "Bangkok", "Beijing", "Beirut", "Bengaluru", "Bishkek", "Colombo",
    "Dhaka", "Dubai", "Hanoi", "Ho Chi Minh City", "Hong Kong", "Hyderabad", "Islamabad",
    "Istanbul", "Jakarta", "Jeddah", "Jerusalem", "Kabul", "Karachi", "Kathmandu", "Kolkata",
    "Kuala Lumpur", "Kyoto", "Manila", "Mumbai", "Muscat", "New Delhi", "Osaka", "Phnom Penh",
    "Riyadh", "Seoul", "Shanghai", "Shenzhen", "Singapore", "Taipei", "Tashkent", "Tbilisi",
    "Tehran", "Tel Aviv", "Thimphu", "Tokyo", "Ulaanbaatar", "Vientiane", "Yangon", "Yerevan",
    # Europe (51)
    "Amsterdam", "Athens", "Barcelona", "Belgrade", "Berlin", "Bern", "Bordeaux", "Bratislava",
    "Brussels", "Bucharest", "Budapest", "Copenhagen", "Dublin", "Edinburgh", "Florence",
    "Geneva", "Hamburg", "Helsinki", "Kraków", "Kyiv", "Lisbon", "Ljubljana", "London", "Lyon",
    "Madrid", "Marseille", "Milan", "Minsk", "Monaco", "Moscow", "Munich", "Naples", "Oslo",
    "Paris", "Porto", "Prague", "Reykjavik", "Riga", "Rome", "Sarajevo", "Seville", "Sofia",
    "Stockholm", "Tallinn", "Valencia", "Venice", "Vienna", "Vilnius", "Warsaw", "Zagreb",
    "Zurich",
    # North America (32)
    "Anchorage", "Atlanta", "Austin", "Boston", "Calgary", "Chicago", "Denver", "Detroit",
    "Guadalajara", "Havana", "Honolulu", "Houston", "Kingston", "Los Angeles", "Mexico City",
    "Miami", "Minneapolis", "Montreal", "Nashville", "New Orleans", "New York", "Ottawa",
    "Philadelphia", "Phoenix", "Portland", "San Diego", "San Francisco", "San Juan", "Seattle",
    "Toronto", "Vancouver", "Washington",
    # South America (17)
    "Bogotá", "Brasília", "Buenos Aires", "Caracas", "Cartagena", "Cusco", "Guayaquil", "La Paz",
    "Lima", "Medellín", "Montevideo", "Quito", "Recife", "Rio de Janeiro", "Santiago",
    "São Paulo", "Valparaíso",
    # Oceania (9)
    "Adelaide", "Auckland", "Brisbane", "Christchurch", "Fiji", "Melbourne", "Perth", "Sydney",
    "Wellington",
)  # fmt: skip


def city_candidates(used: Set[str]) -> Iterator[str]:
    """Unused names in the reference's order of preference, best first, without end.

    First every unused city in random order; then ``"<City> N"`` names for N = 2, 3, …,
    each round over the cities in random order. The caller claims the first one it can
    (a concurrent create may take a name between the read of ``used`` and the claim).
    """
    rng = secrets.SystemRandom()
    available = [city for city in CITIES if city not in used]
    rng.shuffle(available)
    yield from available
    suffix = 2
    while True:
        cities = list(CITIES)
        rng.shuffle(cities)
        for city in cities:
            name = f"{city} {suffix}"
            if name not in used:
                yield name
        suffix += 1


def branch_name(username: str | None, display_name: str | None, key: str | None = None) -> str:
    """``<initials>/<8 hex>``: initials from the display name, else the username, else "nb";
    the hex random, or (``key``) the first of its SHA-256, so the same key names the same
    branch again (a retried call)."""
    initials = "nb"
    if display_name:
        initials = "".join(part[:1].lower() for part in display_name.split(" "))[:2] or "nb"
    elif username:
        initials = username[:2].lower()
    suffix = hashlib.sha256(key.encode()).hexdigest()[:8] if key else secrets.token_hex(4)
    return f"{initials}/{suffix}"


GENERATED_TITLE_WORDS = 5
GENERATED_TITLE_LENGTH = 60
TITLE_QUOTES = "\"'`\u201c\u201d\u2018\u2019\u00ab\u00bb"  # straight, curly, guillemets


def generated_title(text: str) -> str | None:
    """A model's answer to the title prompt as a title: its first line, without surrounding
    quotes, the characters a given title may not hold, at most 5 words and 60 characters;
    None when nothing is left (the automatic title stays)."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return None
    words = validation.without_controls(lines[0]).strip(TITLE_QUOTES + " ").split()
    title = " ".join(words[:GENERATED_TITLE_WORDS])[:GENERATED_TITLE_LENGTH].strip()
    return title.strip(TITLE_QUOTES + " ") or None


def chat_title_from_text(text: str) -> str | None:
    """Reference §6.4: the first user message names a chat (80 chars, then "..."), with the
    characters a given title may not hold turned into spaces."""
    text = validation.without_controls(text)
    if not text:
        return None
    return text if len(text) <= 80 else text[:80] + "..."
