"""Bot policies: who may create sessions. 403 "Access denied" when a policy says no."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Protocol

from openagents.domain.errors import AccessDenied
from openagents.domain.identity import Identity

AUTOMATION = re.compile(
    r"headlesschrome|phantomjs|selenium|webdriver|puppeteer|playwright|scrapy|slimerjs",
    re.IGNORECASE,
)


class BotPolicy(Protocol):
    def check(self, identity: Identity, headers: Mapping[str, str]) -> None: ...


class UserAgentPolicy:
    """One machine: a request needs a User-Agent that is not a known automation signature."""

    def check(self, identity: Identity, headers: Mapping[str, str]) -> None:
        if identity.machine:
            return
        agent = headers.get("user-agent", "").strip()
        if not agent or AUTOMATION.search(agent):
            raise AccessDenied("Access denied")


class WafLabelPolicy:
    """AWS: the WAF bot-control rule inserts a header carrying the bot category label.

    The web ACL's rule adds ``x-amzn-waf-<name>`` to requests labelled by bot control;
    a labelled request is refused unless the category is a verified bot we allow.
    """

    def __init__(self, header: str, allowed: frozenset[str] = frozenset()) -> None:
        self._header = header.lower()
        self._allowed = allowed

    def check(self, identity: Identity, headers: Mapping[str, str]) -> None:
        if identity.machine:
            return
        label = headers.get(self._header, "").strip()
        if label and label not in self._allowed:
            raise AccessDenied("Access denied")
