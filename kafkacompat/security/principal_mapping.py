"""Certificate subject -> principal name, as Kafka's ssl.principal.mapping.rules do it.

Rules are tried in order: `DEFAULT` gives the subject unchanged (RFC 2253,
"CN=alice,OU=eng,O=Acme"); `RULE:pattern/replacement/[LU]` applies when the
pattern matches the whole subject and gives the replacement ($1 names a
group, as in Java), lower- or upper-cased with L or U. When no rule applies
the client is refused, as Kafka refuses it.
"""

from __future__ import annotations

import dataclasses
import re

# one rule at a time, as Kafka's SslPrincipalMapper splits them (commas inside a pattern stay escaped or bracketed)
_RULE = re.compile(r"\s*(?:(?P<default>DEFAULT)|RULE:(?P<pattern>(?:\\.|[^\\/])*)/(?P<replacement>(?:\\.|[^\\/])*)"
                   r"/(?P<case>[LU]?))\s*(?:,|\n|$)")


class PrincipalMappingError(ValueError):
    """A rule list that does not parse, or a subject no rule applies to."""


@dataclasses.dataclass(frozen=True, slots=True)
class Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, subject: str) -> str | None:
        if self.pattern is None:
            return subject
        if not self.pattern.fullmatch(subject):
            return None
        name = self.pattern.sub(self.replacement, subject)
        return name.lower() if self.case == "L" else name.upper() if self.case == "U" else name


def _java_replacement(text: str) -> str:
    """Java's `$1` group references and `\\x` escapes as Python's re.sub wants them."""
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1].replace("\\", "\\\\"))
            i += 2
        elif ch == "$" and i + 1 < len(text) and text[i + 1].isdigit():
            j = i + 1
            while j < len(text) and text[j].isdigit():
                j += 1
            out.append(f"\\g<{text[i + 1:j]}>")
            i = j
        else:
            out.append(ch.replace("\\", "\\\\"))
            i += 1
    return "".join(out)


def parse_rules(text: str) -> list[Rule]:
    """The rules of an ssl.principal.mapping.rules value; PrincipalMappingError names the bad part."""
    rules, pos = [], 0
    text = text.strip() or "DEFAULT"
    while pos < len(text):
        match = _RULE.match(text, pos)
        if not match or match.end() == pos:
            raise PrincipalMappingError(f"cannot parse {text[pos:]!r} (rules are DEFAULT or "
                                        "RULE:pattern/replacement/[LU], comma-separated)")
        pos = match.end()
        if match["default"]:
            rules.append(Rule(None))
            continue
        try:
            pattern = re.compile(match["pattern"].replace("\\/", "/"))
        except re.error as exc:
            raise PrincipalMappingError(f"bad pattern {match['pattern']!r}: {exc}") from None
        rules.append(Rule(pattern, _java_replacement(match["replacement"]), match["case"]))
    return rules


def map_subject(rules: list[Rule], subject: str) -> str:
    """The principal name of a certificate subject; PrincipalMappingError when no rule applies (as Kafka)."""
    for rule in rules:
        name = rule.apply(subject)
        if name is not None:
            return name
    raise PrincipalMappingError(f"no ssl_principal_mapping_rules apply to {subject!r}")


# RFC 2253 short names for the attributes Python's ssl module spells out (Java's X500Principal.getName())
_SHORT = {
    "commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU", "countryName": "C",
    "stateOrProvinceName": "ST", "localityName": "L", "streetAddress": "STREET", "domainComponent": "DC",
    "userId": "UID",
}


def _escape(value: str) -> str:
    escaped = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if escaped.startswith((" ", "#")):
        escaped = "\\" + escaped
    if escaped.endswith(" ") and not escaped.endswith("\\ "):
        escaped = escaped[:-1] + "\\ "
    return escaped


def subject_name(peercert: dict) -> str:
    """A certificate's subject in RFC 2253 form, most specific first ("CN=alice,OU=eng,O=Acme,C=US").

    Python lists the subject in certificate order; RFC 2253 (and Java, so
    Kafka's rules) reverse it. Attributes without a short name keep
    Python's long name (Java would print an OID there).
    """
    rdns = []
    for rdn in reversed(peercert.get("subject", ())):
        rdns.append("+".join(f"{_SHORT.get(key, key)}={_escape(value)}" for key, value in rdn))
    return ",".join(rdns)
