"""MariaDB 10.5+: stored functions over PCRE2 regular expressions.

Koha, OJS and many library catalogues run on MariaDB. What this dialect has to get right:

* **Collation.** Under the default ``utf8mb4_general_ci`` comparisons and ``REGEXP`` ignore
  case and fold ``ß`` to ``S``, and PAD SPACE collations compare ``'a '`` equal to ``'a'``.
  Every parameter is ``utf8mb4_nopad_bin`` (each comparison in a body is exact), every pattern
  starts with ``(?-i)`` (case-sensitive whatever the collation around it), and the results
  are ``utf8mb4_bin``, so a key column keeps ``ß`` and ``SS`` apart.
* **Anchors.** PCRE2's ``$`` also matches before a final newline: end anchors are ``\\z``.
* **No ``TRANSLATE``, no URL decoder, no ``REGEXP_LIKE``.** The key replaces the 26 letters
  (``REPLACE`` is exact in any collation), matches are ``REGEXP_INSTR(...) > 0``, and the two
  byte-level steps (percent-decoding and escaping non-ASCII characters as ``%XX``) are small
  stored functions with a loop, the only compound statements in the file (hence the
  ``DELIMITER`` lines the ``mariadb`` client reads; ``airflow-doi sql install`` reads them too).

MySQL 8 is not a target of this file: its regular expressions are ICU's (``$1`` in
replacements, no ``\\x{...}`` escapes and no ``utf8mb4_nopad_bin``).
"""

from __future__ import annotations

from sqlglot import exp

from airflow_doi.sqlgen import definition
from airflow_doi.sqlgen.dialects.base import Dialect, scan_regex

#: Statement terminator of the file (between ``DELIMITER $$`` and ``DELIMITER ;``): a string
#: no body holds (checked when the file is written).
DELIMITER = "$$"
_PARAM_TYPE = "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin"
_RESULT_TYPE = "LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"

#: The two byte-level steps, as stored functions. Both walk the value's bytes (a binary copy:
#: positions there cost nothing, where a utf8mb4 position is found by scanning), a run of
#: escapes or of non-ASCII bytes at a time, so the work is linear in the value's length.
_HELPERS = (
    f"""CREATE OR REPLACE FUNCTION doi__pct_decode(s {_PARAM_TYPE})
RETURNS {_RESULT_TYPE}
DETERMINISTIC NO SQL
BEGIN
  -- Every % starts a well-formed escape (checked before the call): each run of escapes
  -- becomes its bytes, and the whole is read as UTF-8 once.
  DECLARE b LONGBLOB DEFAULT CONVERT(s USING binary);
  DECLARE decoded LONGBLOB DEFAULT '';
  DECLARE done INT DEFAULT 1;
  DECLARE run_start INT;
  DECLARE run_end INT;
  IF s IS NULL THEN
    RETURN NULL;
  END IF;
  SET run_start = LOCATE('%', b);
  WHILE run_start > 0 DO
    SET run_end = run_start;
    WHILE SUBSTRING(b, run_end, 1) = '%' DO
      SET run_end = run_end + 3;
    END WHILE;
    SET decoded = CONCAT(decoded, SUBSTRING(b, done, run_start - done),
                         UNHEX(REPLACE(SUBSTRING(b, run_start, run_end - run_start), '%', '')));
    SET done = run_end;
    SET run_start = LOCATE('%', b, done);
  END WHILE;
  RETURN CONVERT(CONCAT(decoded, SUBSTRING(b, done)) USING utf8mb4);
END""",
    f"""CREATE OR REPLACE FUNCTION doi__escape_non_ascii(s {_PARAM_TYPE})
RETURNS {_RESULT_TYPE}
DETERMINISTIC NO SQL
BEGIN
  -- Each run of non-ASCII bytes (the UTF-8 of non-ASCII characters) becomes %XX per byte.
  DECLARE b LONGBLOB DEFAULT CONVERT(s USING binary);
  DECLARE encoded LONGBLOB DEFAULT '';
  DECLARE done INT DEFAULT 1;
  DECLARE here INT DEFAULT 1;
  DECLARE run_end INT;
  DECLARE size INT DEFAULT LENGTH(b);
  DECLARE hexed LONGBLOB;
  DECLARE piece INT;
  IF s IS NULL OR LENGTH(s) = CHAR_LENGTH(s) THEN
    RETURN s;
  END IF;
  WHILE here <= size DO
    IF ASCII(SUBSTRING(b, here, 1)) >= 128 THEN
      SET run_end = here + 1;
      WHILE run_end <= size AND ASCII(SUBSTRING(b, run_end, 1)) >= 128 DO
        SET run_end = run_end + 1;
      END WHILE;
      SET encoded = CONCAT(encoded, SUBSTRING(b, done, here - done));
      -- A global REGEXP_REPLACE takes time quadratic in its input: 128 bytes at a time.
      SET hexed = CONVERT(HEX(SUBSTRING(b, here, run_end - here)) USING binary);
      SET piece = 1;
      WHILE piece <= LENGTH(hexed) DO
        SET encoded = CONCAT(encoded, REGEXP_REPLACE(SUBSTRING(hexed, piece, 256), '(..)',
                                                     '%\\\\1'));
        SET piece = piece + 256;
      END WHILE;
      SET done = run_end;
      SET here = run_end;
    ELSE
      SET here = here + 1;
    END IF;
  END WHILE;
  RETURN CONVERT(CONCAT(encoded, SUBSTRING(b, done)) USING utf8mb4);
END""",
)


def _call(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


class MariaDB(Dialect):
    name = "mariadb"
    sqlglot_dialect = "mysql"
    title = "MariaDB 10.5+ (stored functions)"
    proof = "run on a real MariaDB server against every conformance vector in the test suite."
    install = (
        "mariadb --default-character-set=utf8mb4 DB < sql/mariadb/doi_functions.sql, or"
        " airflow-doi sql install mysql://user@host/DB; needs CREATE ROUTINE (and, with binary"
        " logging on, log_bin_trust_function_creators). Compare and join on doi_key(x): its"
        " result collates utf8mb4_bin; a *_general_ci column makes ß equal S."
    )
    limitations = (
        "MySQL 8 is not supported by this file (ICU regular expressions); MariaDB 10.5 or newer"
        " is needed (PCRE2, utf8mb4_nopad_bin).",
    )
    text_type = _RESULT_TYPE
    bool_type = "BOOLEAN"

    # --- regular expressions: PCRE2 ------------------------------------------------------

    def regex(self, pattern: str) -> str:
        anchors = {i for i, char, in_class in scan_regex(pattern) if char == "$" and not in_class}
        pattern = "".join("\\z" if i in anchors else c for i, c in enumerate(pattern))
        return "(?-i)" + "".join(
            c if 0x20 <= ord(c) < 0x7F else f"\\x{{{ord(c):02X}}}" for c in pattern
        )

    def re_match(self, value: exp.Expression, pattern: str) -> exp.Expression:
        instr = _call("REGEXP_INSTR", value, definition.lit(self.regex(pattern)))
        return exp.GT(this=instr, expression=exp.Literal.number(0))

    def re_replace(self, value: exp.Expression, pattern: str, replacement: str) -> exp.Expression:
        return _call(
            "REGEXP_REPLACE", value, definition.lit(self.regex(pattern)),
            definition.lit(replacement),
        )

    def re_extract(self, value: exp.Expression, pattern: str) -> exp.Expression:
        # No group argument to REGEXP_SUBSTR: the patterns are anchored at both ends, so the
        # whole value is replaced by group 1, or (the second branch) by nothing.
        body = pattern.removeprefix("(?s)")
        if not (body.startswith("^") and body.endswith("$")):
            raise ValueError(f"re_extract needs a pattern anchored at both ends: {pattern!r}")
        either = f"(?:{pattern})|^[\\s\\S]*"
        replaced = self.re_replace(value, either, "\\1")
        return exp.Nullif(this=replaced, expression=definition.lit(""))

    # --- the key: no TRANSLATE -----------------------------------------------------------

    def ascii_upper_of_ascii(self, value: exp.Expression) -> exp.Expression:
        # Proven printable ASCII: every UPPER maps exactly a-z there.
        return exp.Upper(this=value)

    def key(self, value: exp.Expression) -> exp.Expression:
        # REPLACE compares exactly in every collation: a-z to A-Z and nothing else.
        for lower, upper in zip(definition.LOWER, definition.UPPER, strict=True):
            value = _call("REPLACE", value, definition.lit(lower), definition.lit(upper))
        return value

    # --- byte-level steps: the stored helpers --------------------------------------------

    def pct_decode(self, value: exp.Expression) -> exp.Expression:
        return _call("doi__pct_decode", value)

    def escape_non_ascii(self, value: exp.Expression) -> exp.Expression:
        return _call("doi__escape_non_ascii", value)

    # --- DDL -----------------------------------------------------------------------------

    def helper_functions(self) -> list[str]:
        return [f"{text}{DELIMITER}" for text in _HELPERS]

    def create_function(
        self, name: str, param: str, body: str, *, returns_boolean: bool, null_aware: bool
    ) -> str:
        if DELIMITER in body:
            raise ValueError(f"the body of {name} holds the file's delimiter {DELIMITER!r}")
        # No STRICT in MariaDB; the bodies give NULL for NULL (is_valid false, reason 'empty').
        returns = self.bool_type if returns_boolean else _RESULT_TYPE
        return (
            f"CREATE OR REPLACE FUNCTION {name}({param} {_PARAM_TYPE})\n"
            f"RETURNS {returns}\nDETERMINISTIC NO SQL\nRETURN\n{self.indent(body)}{DELIMITER}"
        )

    def header(self) -> str:
        return f"{super().header()}\n\nDELIMITER {DELIMITER}"

    def footer(self) -> str:
        return "DELIMITER ;"
