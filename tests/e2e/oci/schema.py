#!/usr/bin/python3
"""Validate an OCI state (`ccvm-oci state` output) or a bundle's config.json against
runtime-spec's own JSON schemas, as Debian ships them (golang-github-opencontainers-
specs-dev), with python3-jsonschema.

Usage: schema.py state|config FILE   (FILE "-": standard input)
Exit 0 when valid; 1 with the first error on stderr; 2 when the schema is missing.
"""
import json
import os
import sys

import jsonschema

SCHEMA_DIR = "/usr/share/gocode/src/github.com/opencontainers/runtime-spec/schema"
SCHEMAS = {"state": "state-schema.json", "config": "config-schema.json"}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in SCHEMAS:
        print(__doc__, file=sys.stderr)
        return 2
    path = os.path.join(SCHEMA_DIR, SCHEMAS[sys.argv[1]])
    if not os.path.exists(path):
        print(f"schema.py: {path} is missing (golang-github-opencontainers-specs-dev)",
              file=sys.stderr)
        return 2
    with open(path, encoding="utf-8") as f:
        schema = json.load(f)
    src = sys.stdin if sys.argv[2] == "-" else open(sys.argv[2], encoding="utf-8")
    doc = json.load(src)
    resolver = jsonschema.RefResolver(base_uri="file://" + SCHEMA_DIR + "/", referrer=schema)
    validator = jsonschema.Draft4Validator(schema, resolver=resolver)
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.path))
    if errors:
        e = errors[0]
        print(f"{'/'.join(str(p) for p in e.path) or '(top)'}: {e.message}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
