#!/usr/bin/env bash
# zt download against a fake Hub on loopback (tests/fixtures/hub_server.py: the API with paged
# trees, resolve URLs that redirect LFS files to a second port, Range, injected failures): the
# cache layout, a second run that does nothing, --force, --include/--exclude and FILES, --dry-run,
# --local-dir, resume after a dropped connection, stale partials, a full disk, a corrupted body,
# 401/404/500, names with '..', symbolic links planted or swapped in mid-download, the token kept
# from the LFS host, offline mode, huggingface_hub reading zt's cache (and zt reading the Python
# client's), datasets, model.path = "hf://...", bad input.
# kernel levels: own only (what it checks does not depend on the CPU kernels)
. "$(dirname "$0")/lib.sh"

HFPY=$ROOT/build/hub-venv/bin/python
"$HFPY" -c 'import huggingface_hub' 2>/dev/null ||
  fail "huggingface_hub is not installed in build/hub-venv (scripts/install-deps.sh installs it)"

# the repositories the server serves
mkdir -p repo/sub datarepo
echo '{"model_type": "llama"}' > repo/config.json
echo '{"version": "1.0"}' > repo/tokenizer.json
echo 'same bytes' > repo/sub/notes.txt
cp repo/sub/notes.txt repo/dup.txt # one blob, two snapshot links
head -c 3000000 /dev/urandom > repo/model.safetensors
head -c 5000 /dev/urandom > repo/sub/extra.bin
echo '{"text": "hello"}' > datarepo/train.jsonl
mkdir -p metarepo/.cache/huggingface/download # a remote name inside --local-dir's metadata
echo '{"model_type": "llama"}' > metarepo/config.json
printf '0000000000000000000000000000000000000000\nbad\n0\n' > metarepo/.cache/huggingface/download/config.json.metadata
make_tiny model
$PY -c '
import json
with open("data.jsonl", "w") as f:
    for i in range(4): f.write(json.dumps({"input_ids": [(i * 7 + j * 5) % 64 for j in range(24)]}) + "\n")'

# base control: trees come in pages of 2 entries, so every listing follows Link headers
ctl() { printf '{"page": 2%s}\n' "${1:+, $1}" > ctl.json.tmp && mv ctl.json.tmp ctl.json; }
ctl
$PY "$ROOT/tests/fixtures/hub_server.py" --repo org/tiny=repo --repo org/model=model --repo dataset:org/data=datarepo --repo org/meta=metarepo \
  --ports ports --log log.jsonl --control ctl.json 2>server.err &
srv=$!
trap 'kill $srv 2>/dev/null; rm -rf "$TMP"' EXIT
for _ in $(seq 100); do [ -s ports ] && break; sleep 0.1; done
read -r HUB LFS < ports || { fail "the hub server did not start: $(cat server.err)"; done_testing; }
export HF_ENDPOINT=http://127.0.0.1:$HUB HF_HOME=$TMP/hfhome HF_HUB_CACHE=$TMP/cache ZT_HUB_RETRIES=2
unset HF_TOKEN HF_TOKEN_PATH HF_HUB_OFFLINE

# log EXPR: a Python expression over rows, the requests logged since the last ': > log.jsonl'
log() { $PY -c 'import json, sys; rows = [json.loads(l) for l in open("log.jsonl")]; print(eval(sys.argv[1]))' "$1"; }
check() { if [ "$2" = "$3" ]; then say "ok - $1"; else fail "$1: got '$2', wanted '$3'"; fi; }
files_in() { (cd "$1" && find . \( -type f -o -type l \) -not -path './.cache/*' | sed 's|^\./||' | sort | tr '\n' ' '); }
sha() { sha256sum "$1" | cut -c1-64; }
ALL="config.json dup.txt model.safetensors sub/extra.bin sub/notes.txt tokenizer.json "

# --- the cache, then a second run that does nothing ------------------------------------------
: > log.jsonl
expect_ok "download into the cache" "$ZT" download org/tiny
commit=$(cat cache/models--org--tiny/refs/main)
snap=$TMP/cache/models--org--tiny/snapshots/$commit
check "prints the snapshot" "$(cat "$TMP/out")" "$snap"
check "every file" "$(files_in "$snap")" "$ALL"
for f in $ALL; do cmp -s "repo/$f" "$snap/$f" || fail "$f differs"; done
check "LFS blob named by its sha256, linked relatively" "$(readlink "$snap/sub/extra.bin")" "../../../blobs/$(sha repo/sub/extra.bin)"
check "small blob named by its git oid" "$(readlink "$snap/config.json")" "../../blobs/$(git hash-object repo/config.json)"
check "equal files share one blob, fetched once" "$(log 'sum(1 for r in rows if r["path"].endswith(("/dup.txt", "/notes.txt")))')" 1
check "no partial left" "$(find cache -name '*.incomplete' | wc -l)" 0
check "LFS files came from the second host" "$(log 'sorted(r["path"].split("=")[-1] for r in rows if r["server"] == "lfs")')" \
  "['model.safetensors', 'sub/extra.bin']"

: > log.jsonl
expect_ok "the same download again" "$ZT" download org/tiny
check "...prints the same snapshot" "$(cat "$TMP/out")" "$snap"
check "...transfers nothing" "$(log 'sum(1 for r in rows if "/resolve/" in r["path"] or r["server"] == "lfs")')" 0
: > log.jsonl
expect_ok "--force" "$ZT" download org/tiny config.json --force
check "...downloads again" "$(log 'sum(1 for r in rows if r["path"].endswith("/config.json"))')" 1

# --- selection -------------------------------------------------------------------------------
expect_ok "--include/--exclude" "$ZT" download org/tiny --cache-dir c2 --include '*.json' --include 'sub/' \
  --exclude 'tokenizer*' --max-workers 1
check "...selects" "$(files_in "$(cat "$TMP/out")")" "config.json sub/extra.bin sub/notes.txt "
expect_ok "FILES" "$ZT" download org/tiny --cache-dir c3 config.json sub/extra.bin
check "...selects" "$(files_in "$(cat "$TMP/out")")" "config.json sub/extra.bin "
expect_ok "--dry-run" "$ZT" download org/tiny --cache-dir c3 --dry-run
check "...lists what is there and what is not" "$(grep -c 'present$' "$TMP/out") $(grep -c 'download$' "$TMP/out")" "2 4"
grep -q "^model.safetensors	3000000	download$" "$TMP/out" || fail "--dry-run line: $(cat "$TMP/out")"
"$ZT" download org/tiny --cache-dir c3x --dry-run >/dev/null 2>&1
[ ! -e c3x ] && say "ok - --dry-run writes nothing" || fail "--dry-run created c3x"

# --- a local directory -----------------------------------------------------------------------
expect_ok "--local-dir" "$ZT" download org/tiny --local-dir ld
check "...prints the directory" "$(cat "$TMP/out")" ld
check "...plain files" "$(files_in ld)" "$ALL"
[ -L ld/config.json ] && fail "ld/config.json is a link"
for f in $ALL; do cmp -s "repo/$f" "ld/$f" || fail "ld/$f differs"; done
check "...metadata" "$(head -n 2 ld/.cache/huggingface/download/model.safetensors.metadata | tr '\n' ' ')" \
  "$commit $(sha repo/model.safetensors) "
"$HFPY" - "$commit" "$(sha repo/model.safetensors)" <<'PY' && say "ok - huggingface_hub reads the local metadata" || fail "local metadata"
import sys
from pathlib import Path
from huggingface_hub._local_folder import read_download_metadata
m = read_download_metadata(Path("ld"), "model.safetensors")
assert m and m.commit_hash == sys.argv[1] and m.etag == sys.argv[2], m
m = read_download_metadata(Path("ld"), "sub/notes.txt")
assert m and m.commit_hash == sys.argv[1], m
PY
: > log.jsonl
expect_ok "--local-dir again" "$ZT" download org/tiny --local-dir ld
check "...transfers nothing" "$(log 'sum(1 for r in rows if "/resolve/" in r["path"] or r["server"] == "lfs")')" 0

# --- resume across runs; stale partials ------------------------------------------------------
ctl '"drop": {"model.safetensors": 1000000}'
: > log.jsonl
ZT_HUB_RETRIES=1 expect_exit 1 "a connection dropped mid-file" "model.safetensors.*after 2 attempts.*partial file is kept" \
  "$ZT" download org/tiny model.safetensors --cache-dir c4
partial=c4/models--org--tiny/blobs/$(sha repo/model.safetensors).incomplete
check "...keeps the partial" "$(stat -c %s "$partial" 2>&1)" 1000000
check "...nothing in place" "$(ls c4/models--org--tiny/snapshots/*/ 2>/dev/null | wc -l)" 0
ctl
: > log.jsonl
expect_ok "the next run resumes" "$ZT" download org/tiny model.safetensors --cache-dir c4
check "...with a Range request" "$(log '[r["range"] for r in rows if r["server"] == "lfs"]')" "['bytes=1000000-']"
check "...fewer bytes" "$(log 'sum(r["sent"] for r in rows if r["server"] == "lfs")')" 2000000
cmp -s repo/model.safetensors "$(cat "$TMP/out")/model.safetensors" && say "ok - ...the same bytes" || fail "resumed file differs"

ctl '"drop": {"model.safetensors": [1500000, 1]}'
: > log.jsonl
expect_ok "a dropped connection, retried in the same run" "$ZT" download org/tiny model.safetensors --cache-dir c4b
check "...continues where it stopped" "$(log '[(r["range"], r["sent"]) for r in rows if r["server"] == "lfs"]')" \
  "[(None, 1500000), ('bytes=1500000-', 1500000)]"
cmp -s repo/model.safetensors "$(cat "$TMP/out")/model.safetensors" && say "ok - ...the same bytes" || fail "retried file differs"
ctl

# a partial longer than the file (Python's 416 trap) and partials of other etags are discarded
mkdir -p c5/models--org--tiny/blobs ld5/.cache/huggingface/download
head -c 3000001 /dev/urandom > "c5/models--org--tiny/blobs/$(sha repo/model.safetensors).incomplete"
stale=$(printf 'b%.0s' $(seq 64))
echo junk > "c5/models--org--tiny/blobs/$stale.incomplete"
echo junk > "ld5/.cache/huggingface/download/model.safetensors.$stale.incomplete"
expect_ok "an overlong partial" "$ZT" download org/tiny model.safetensors --cache-dir c5
cmp -s repo/model.safetensors "$(cat "$TMP/out")/model.safetensors" && say "ok - ...is replaced" || fail "overlong partial"
check "...and the cache's stale partial is gone" "$(ls c5/models--org--tiny/blobs | grep -c incomplete)" 0
expect_ok "a stale local partial" "$ZT" download org/tiny model.safetensors --local-dir ld5
check "...is gone" "$(ls ld5/.cache/huggingface/download | grep -c incomplete)" 0

# --- a corrupted body ------------------------------------------------------------------------
ctl '"corrupt": ["model.safetensors"]'
expect_exit 1 "a corrupted body" "model.safetensors.*corrupted: its sha256" "$ZT" download org/tiny model.safetensors --cache-dir c6
check "...leaves nothing" "$(find c6 -path '*blobs/*' -o -path '*snapshots/*/*' | wc -l)" 0
ctl

# --- a full disk (the partial file is a device node like /dev/full: a link to it is refused) ---
mkdir -p full/.cache/huggingface/download
if mknod "full/.cache/huggingface/download/model.safetensors.$(sha repo/model.safetensors).incomplete" c 1 7 2>/dev/null; then
  expect_exit 1 "a full disk" "writing 'model.safetensors' failed: the disk is full" \
    "$ZT" download org/tiny model.safetensors --local-dir full
else say "skip: a full disk (mknod needs root)"; fi

# --- authentication: 401, the token only to the endpoint ------------------------------------
ctl '"token": "s3cret-t0ken"'
expect_exit 2 "401 without a token" "HTTP 401.*private or gated.*--token, HF_TOKEN" "$ZT" download org/tiny --cache-dir c7
expect_exit 2 "401 with a wrong token" "HTTP 401.*token was refused" "$ZT" download org/tiny --cache-dir c7 --token wrong
: > log.jsonl
expect_ok "--token" "$ZT" download org/tiny --cache-dir c7 --token s3cret-t0ken
check "...the hub got it" "$(log 'all(r["auth"] for r in rows if r["server"] == "hub")')" True
check "...the LFS host never did" "$(log '[r["auth"] for r in rows if r["server"] == "lfs"]')" "[False, False]"
grep -rq s3cret "$TMP/out" "$TMP/err" && fail "the token was printed"
HF_TOKEN=s3cret-t0ken expect_ok "HF_TOKEN" "$ZT" download org/tiny config.json --cache-dir c7b
echo s3cret-t0ken > token.txt
HF_TOKEN_PATH=$TMP/token.txt expect_ok "HF_TOKEN_PATH" "$ZT" download org/tiny config.json --cache-dir c7c
mkdir -p hfhome && echo s3cret-t0ken > hfhome/token
expect_ok "\$HF_HOME/token" "$ZT" download org/tiny config.json --cache-dir c7d
rm hfhome/token
ctl

# --- 404, 500 -------------------------------------------------------------------------------
expect_exit 2 "unknown repository" "model 'org/nosuch'.*not found \(HTTP 404\)" "$ZT" download org/nosuch --cache-dir c8
expect_exit 2 "unknown revision" "revision 'nosuch' not found in model 'org/tiny'" \
  "$ZT" download org/tiny --revision nosuch --cache-dir c8
expect_exit 2 "a file the repository lacks" "file 'nosuch.txt' is not in model 'org/tiny'" \
  "$ZT" download org/tiny nosuch.txt --cache-dir c8
ctl '"fail": [["/config.json", 404, -1]]'
expect_exit 2 "404 on the file" "'config.json'.*not found \(HTTP 404\)" "$ZT" download org/tiny config.json --cache-dir c8
ctl '"fail": [["/config.json", 500, 1], ["/revision/main", 503, 1]]'
: > log.jsonl
expect_ok "500 then success" "$ZT" download org/tiny config.json --cache-dir c9
check "...retried" "$(log '[r["status"] for r in rows if r["path"].endswith(("/config.json", "/revision/main"))]')" \
  "[503, 200, 500, 200]"
ctl '"fail": [["/config.json", 500, -1]]'
ZT_HUB_RETRIES=1 expect_exit 1 "500 for ever" "config.json.*after 2 attempts: HTTP 500" \
  "$ZT" download org/tiny config.json --cache-dir c9b

# --- remote names with '..' or absolute -------------------------------------------------------
ctl '"extra": ["../evil.txt"]'
expect_exit 2 "a '../' name" "refusing the remote file name '../evil.txt'" "$ZT" download org/tiny --cache-dir c10
ctl '"extra": ["/etc/evil.txt"]'
expect_exit 2 "an absolute name" "refusing the remote file name '/etc/evil.txt'" "$ZT" download org/tiny --local-dir c10
ctl '"extra": ["sub/../../evil.txt"]'
expect_exit 2 "a name with '..' inside" "refusing" "$ZT" download org/tiny --local-dir c10
check "...nothing written" "$(ls -d c10 evil.txt ../evil.txt 2>/dev/null | wc -l)" 0
ctl
expect_exit 2 "FILES with '..'" "refusing the remote file name '../x'" "$ZT" download org/tiny ../x --cache-dir c10

# --- symbolic links zt did not make, names in zt's own metadata ------------------------------
mkdir -p victim ld11 && ln -s ../victim ld11/sub
expect_exit 2 "a symbolic link planted in --local-dir" "ld11/sub.*symbolic link zt did not make" \
  "$ZT" download org/tiny --local-dir ld11
check "...nothing written through it" "$(ls -A victim | wc -l)" 0
mkdir -p ld12 && ln -s ../victim ld12/.cache
expect_exit 2 "a symbolic link for --local-dir's metadata folder" "ld12/.cache.*symbolic link zt did not make" \
  "$ZT" download org/tiny config.json --local-dir ld12
check "...nothing written through it" "$(ls -A victim | wc -l)" 0
mkdir -p c11/models--org--tiny && ln -s ../../victim c11/models--org--tiny/blobs
expect_exit 2 "a symbolic link planted in the cache (blobs)" "c11/models--org--tiny/blobs.*symbolic link zt did not make" \
  "$ZT" download org/tiny --cache-dir c11
check "...nothing written through it" "$(ls -A victim | wc -l)" 0
mkdir -p "c12/models--org--tiny/snapshots/$commit" && ln -s ../../../../victim "c12/models--org--tiny/snapshots/$commit/sub"
expect_exit 2 "a symbolic link planted in a snapshot" "snapshots/$commit/sub.*symbolic link zt did not make" \
  "$ZT" download org/tiny --cache-dir c12
check "...nothing written through it" "$(ls -A victim | wc -l)" 0
expect_ok "the cache's own links are followed again" "$ZT" download org/tiny --cache-dir c3
expect_exit 2 "a remote file inside --local-dir's metadata folder" \
  "refusing the remote file '.cache/huggingface/download/config.json.metadata'" "$ZT" download org/meta --local-dir ld13
check "...nothing written" "$(ls -A ld13 2>/dev/null | wc -l)" 0
expect_ok "...which a cache download takes as a file" "$ZT" download org/meta --cache-dir c13
cmp -s metarepo/.cache/huggingface/download/config.json.metadata \
  "$(cat "$TMP/out")/.cache/huggingface/download/config.json.metadata" && say "ok - ...in its snapshot" || fail "meta in the cache"

# --- a folder swapped for a link while a file downloads (the server pauses mid-body) -----------
# swap_mid_download FOLDER CONTROL ARGS...: zt download org/tiny sub/extra.bin ARGS...; once the
# server has sent part of the file, FOLDER (it holds the partial file) is moved away and replaced
# by a link to victim, with a decoy there named like the partial. Sets $rc.
swap_mid_download() {
  local folder=$1 extra=$2 pid p
  shift 2
  rm -rf victim ctl.json.paused && mkdir victim
  ctl "\"pause\": {\"sub/extra.bin\": 1000}${extra:+, $extra}"
  "$ZT" download org/tiny sub/extra.bin "$@" >"$TMP/out" 2>"$TMP/err" &
  pid=$!
  for _ in $(seq 1000); do [ -s ctl.json.paused ] || ! kill -0 $pid 2>/dev/null && break; sleep 0.01; done
  [ -s ctl.json.paused ] || fail "the server never paused: $(cat "$TMP/err")"
  for p in "$folder"/*.incomplete; do echo decoy > "victim/${p##*/}"; done
  mv "$folder" "$folder.moved" && ln -s "$TMP/victim" "$folder"
  ctl "$extra"
  wait $pid
  rc=$?
  ! grep -qE 'AddressSanitizer|runtime error|LeakSanitizer' "$TMP/err" || fail "a sanitizer report: $(cat "$TMP/err")"
}
# victim_is FILES: victim holds just these, each still the decoy
victim_is() { check "$1" "$(ls victim | tr '\n' ' ')$(cat victim/* 2>/dev/null | sort -u)" "$2 decoy"; }
xsha=$(sha repo/sub/extra.bin)
swap_mid_download ld14/.cache/huggingface/download/sub "" --local-dir ld14
check "a link swapped in mid-download is refused" \
  "$rc $(grep -c "ld14/.cache/huggingface/download/sub' is a symbolic link zt did not make" "$TMP/err")" "2 1"
victim_is "...the victim folder is untouched" "extra.bin.$xsha.incomplete"
[ ! -e ld14/sub/extra.bin ] || cmp -s repo/sub/extra.bin ld14/sub/extra.bin || fail "...wrong bytes in ld14/sub/extra.bin"
swap_mid_download ld15/.cache/huggingface/download/sub '"corrupt": ["sub/extra.bin"]' --local-dir ld15
check "...and when the download is corrupted" "$rc $(grep -c "sub/extra.bin' is corrupted" "$TMP/err")" "1 1"
victim_is "...the victim's file is not deleted" "extra.bin.$xsha.incomplete"
swap_mid_download c14/models--org--tiny/blobs "" --cache-dir c14
check "...in the cache" "$rc $(grep -c "c14/models--org--tiny/blobs' is a symbolic link zt did not make" "$TMP/err")" "2 1"
victim_is "...the victim folder is untouched" "$xsha.incomplete"
check "...no snapshot link" "$(find c14 -path '*snapshots/*/*' | wc -l)" 0
ctl

# --- offline --------------------------------------------------------------------------------
: > log.jsonl
HF_HUB_OFFLINE=1 expect_ok "offline, from the cache" "$ZT" download org/tiny
check "...the snapshot" "$(cat "$TMP/out")" "$snap"
HF_HUB_OFFLINE=1 expect_ok "offline, FILES" "$ZT" download org/tiny model.safetensors --revision "$commit"
HF_HUB_OFFLINE=1 expect_ok "offline, a local dir" "$ZT" download org/tiny sub/notes.txt --local-dir ld
check "...no request" "$(wc -l < log.jsonl)" 0
HF_HUB_OFFLINE=1 expect_exit 2 "offline, not in the cache" "'org/data'.*not in the cache.*HF_HUB_OFFLINE" "$ZT" download org/data
HF_HUB_OFFLINE=1 expect_exit 2 "offline, a file not in the cache" "'nosuch.txt' is not in.*HF_HUB_OFFLINE" \
  "$ZT" download org/tiny nosuch.txt

# --- huggingface_hub reads zt's cache, zt reads the Python client's ----------------------------
HF_HUB_OFFLINE=1 "$HFPY" - "$TMP/cache" $ALL <<'PY' && say "ok - huggingface_hub reads zt's cache" || fail "hf offline"
import filecmp, sys
from huggingface_hub import hf_hub_download, snapshot_download
for f in sys.argv[2:]:
    p = hf_hub_download("org/tiny", f, cache_dir=sys.argv[1], local_files_only=True)
    assert filecmp.cmp(p, "repo/" + f, shallow=False), f
snapshot_download("org/tiny", cache_dir=sys.argv[1], local_files_only=True)
PY
"$HFPY" -c 'from huggingface_hub import hf_hub_download; hf_hub_download("org/tiny", "model.safetensors", cache_dir="cpy")' \
  2>py.err && say "ok - huggingface_hub downloads from the fake hub" || fail "huggingface_hub download: $(tail -n 3 py.err)"
HF_HUB_OFFLINE=1 expect_ok "zt finds the Python client's file offline" "$ZT" download org/tiny model.safetensors --cache-dir cpy
: > log.jsonl
expect_ok "zt completes the Python client's cache" "$ZT" download org/tiny --cache-dir cpy
check "...without fetching its blob again" \
  "$(log 'sum(1 for r in rows if "model.safetensors" in r["path"] and r["server"] == "lfs")')" 0

# --- datasets --------------------------------------------------------------------------------
expect_ok "a dataset" "$ZT" download org/data --repo-type dataset
cmp -s datarepo/train.jsonl "$(cat "$TMP/out")/train.jsonl" && [ -d cache/datasets--org--data/snapshots ] &&
  say "ok - ...in datasets--org--data" || fail "dataset: $(cat "$TMP/out")"

# --- model.path = "hf://org/name" -------------------------------------------------------------
recipe() {
  printf '[model]\npath = "%s"\ndtype = "fp32"\n[data]\ntrain = "data.jsonl"\nformat = "tokens"\nmax_length = 32\n' "$1"
  printf '[train]\nmax_steps = 1\nmicro_batch_size = 2\n'
}
recipe model > local.toml
recipe hf://org/model@main > hub.toml
expect_ok "eval of the local model" "$ZT" eval local.toml
base=$(cat "$TMP/out")
expect_ok "eval of model.path = hf://org/model@main" "$ZT" eval hub.toml
check "...the same loss" "$(cat "$TMP/out")" "$base"
[ -d cache/models--org--model/snapshots ] && say "ok - ...through the cache" || fail "hf:// did not use the cache"
expect_ok "validate of model.path = hf://org/model@main" "$ZT" validate hub.toml
expect_ok "pretrain of model.path = hf://org/model@main" "$ZT" pretrain hub.toml output.dir=hub-run
grep -q '"path": "'"$PWD"'/cache/models--org--model/snapshots/' hub-run/recipe.resolved.toml 2>/dev/null ||
  grep -q "cache/models--org--model/snapshots/" hub-run/recipe.resolved.toml && say "ok - ...the run records the snapshot" ||
  fail "recipe.resolved.toml: $(grep -A2 '\[model\]' hub-run/recipe.resolved.toml)"

# --- bad input -------------------------------------------------------------------------------
expect_exit 2 "no REPO_ID" "missing REPO_ID" "$ZT" download
expect_exit 2 "a bad repository id" "'a/b/c' is not a repository id" "$ZT" download a/b/c
expect_exit 2 "'..' in a repository id" "is not a repository id" "$ZT" download org/..x
expect_exit 2 "a bad revision" "--revision '../x'" "$ZT" download org/tiny --revision ../x
expect_exit 2 "both directories" "not both" "$ZT" download org/tiny --local-dir a --cache-dir b
expect_exit 2 "FILES and --include" "not both" "$ZT" download org/tiny config.json --include '*'
expect_exit 2 "a bad repo type" "repo-type 'space'" "$ZT" download org/tiny --repo-type space
expect_exit 2 "--max-workers 0" "max-workers" "$ZT" download org/tiny --max-workers 0
HF_ENDPOINT=https://example.com expect_exit 2 "--insecure off loopback" "only for a loopback" "$ZT" download org/tiny --insecure
HF_ENDPOINT=http://example.com HF_TOKEN=x expect_exit 2 "a token over plain http" "plain http" "$ZT" download org/tiny
HF_ENDPOINT=ftp://x expect_exit 2 "a bad endpoint" "HF_ENDPOINT 'ftp://x'" "$ZT" download org/tiny
HF_HUB_DOWNLOAD_TIMEOUT=soon expect_exit 2 "a bad timeout" "HF_HUB_DOWNLOAD_TIMEOUT='soon'" "$ZT" download org/tiny
HF_TOKEN_PATH=$TMP/nosuch expect_exit 2 "a missing token file" "HF_TOKEN_PATH.*does not exist" "$ZT" download org/tiny
HF_TOKEN=$'bad\ntoken' expect_exit 2 "a token with a newline" "token from HF_TOKEN has characters" "$ZT" download org/tiny
HF_ENDPOINT=http://127.0.0.1:1 ZT_HUB_RETRIES=0 expect_exit 1 "no server" "Could.*connect.*HF_HUB_OFFLINE" "$ZT" download org/tiny
done_testing
