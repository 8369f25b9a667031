# Shared set-up for scripts/run, scripts/test and the benchmarks: packages, build,
# a private MariaDB under $VAR, the runner, the API workers and nginx, each started
# in the background with a PID file under $VAR/run and stopped by that PID.
# Source it with ROOT, VAR, PORT and BUILD set (LISTEN_ADDR: nginx's address,
# 127.0.0.1 unless set; scripts/cluster runs several hosts on loopback ones).

PACKAGES="meson ninja-build pkg-config gcc libc6-dev git ca-certificates openssl
  libfcgi-dev libjson-c-dev libmariadb-dev libgit2-dev libsodium-dev libcurl4-openssl-dev
  libpcre2-dev libseccomp-dev libarchive-dev libssl-dev
  mariadb-server mariadb-client nginx-light
  nodejs npm iproute2 nftables e2fsprogs util-linux procps psmisc
  python3 python3-pytest python3-requests python3-yaml python3-cryptography python3-jwt
  wrk hyperfine rclone fuse3"

log() { printf '[agenthost] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Those of the named packages that are not installed, one a line.
missing_packages() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || echo "$p"
    done
}

# apt-get install of those of the named packages not installed yet, for the
# tests' own needs; apt's lists are refreshed only if the install fails
# without. Its status is apt-get's.
apt_install_missing() { # apt_install_missing FOR_WHAT PACKAGE…
    local what=$1 want; shift
    mapfile -t want < <(missing_packages "$@")
    [ ${#want[@]} -eq 0 ] && return 0
    log "installing ${want[*]} for $what"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${want[@]}" </dev/null >/dev/null ||
        { apt-get update -qq </dev/null >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
            --no-install-recommends "${want[@]}" </dev/null >/dev/null; }
}

install_packages() {
    local missing
    # shellcheck disable=SC2086 # the list is words
    mapfile -t missing < <(missing_packages $PACKAGES)
    # Debian's npm is only needed where node came from Debian too.
    if command -v npm >/dev/null 2>&1; then
        missing=("${missing[@]/#npm/}"); missing=("${missing[@]/#nodejs/}")
    fi
    local want=()
    for p in "${missing[@]}"; do [ -n "$p" ] && want+=("$p"); done
    [ ${#want[@]} -eq 0 ] && return 0
    log "installing ${want[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq </dev/null >/dev/null
    apt-get install -y -qq --no-install-recommends "${want[@]}" </dev/null >/dev/null \
        || die "apt-get install failed"
}

# npm tools the tests use (s3rver: a real S3 server on loopback for the S3 client
# and the files backend), cached under var/ like the OpenAPI linter.
S3RVER_VERSION=3.7.1
install_npm_tools() {
    local dir=$ROOT/var/npm-tools
    [ -x "$dir/node_modules/.bin/s3rver" ] && return 0
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "s3rver@$S3RVER_VERSION" \
        </dev/null >/dev/null 2>&1 || die "npm install s3rver failed"
}

build() { # build DIR [meson options…]
    local dir=$1; shift
    if [ ! -f "$dir/build.ninja" ]; then
        meson setup "$dir" "$ROOT" "$@" >/dev/null || die "meson setup $dir failed"
    fi
    ninja -C "$dir" >/dev/null || { ninja -C "$dir"; die "build failed"; }
}

pid_alive() { [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

wait_for() { # wait_for SECONDS DESCRIPTION COMMAND…
    local n=$(( $1 * 10 )) what=$2; shift 2
    while ! "$@" >/dev/null 2>&1; do
        n=$((n - 1)); [ $n -le 0 ] && die "timed out waiting for $what"
        sleep 0.1
    done
}

stop_pid() { # stop_pid PIDFILE [SECONDS]
    local f=$1 t=${2:-30}
    pid_alive "$f" || { rm -f "$f"; return 0; }
    local pid; pid=$(cat "$f")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq $((t * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    rm -f "$f"
}

# Runs "$@" (in the caller's subshell) with oom_score_adj ADJ, which what it
# starts inherits: the OOM killer takes a sandbox's program (1000, see
# lib/sandbox/inside.c) long before MariaDB (-500) or the API, runner and nginx
# (-200). Best effort: a container may refuse negative values even to root.
with_oom_adj() { local adj=$1; shift; echo "$adj" 2>/dev/null >/proc/self/oom_score_adj || true; exec "$@"; }

mysql_cli() { mariadb --no-defaults --socket="$VAR/run/mysql.sock" -uroot "$@"; }

# The logs hold what agents print on stderr (secrets among it), gateway tokens
# and presigned URLs' signatures: root's alone, on a host other users share.
# private_log_dir DIR: DIR made (or narrowed to) 0750, the files in it 0640.
private_log_dir() {
    mkdir -p "$1"
    chmod 750 "$1"
    find "$1" -maxdepth 1 -type f -exec chmod 640 {} +
}

# private_log FILE: FILE made 0640 before a program appends to it (a shell's
# redirection or mariadbd would make it 0644 or 0660).
private_log() { [ -e "$1" ] || install -m 640 /dev/null "$1"; chmod 640 "$1"; }

# mariadb-install-db makes anonymous accounts (''@localhost, ''@<host name>)
# and a `test` database any account may fill (grants to PUBLIC on test and
# test\_%); the stack needs none of them. Removed at every start, so a state
# directory made before this is mended too.
harden_mariadb() {
    mysql_cli -e "DELETE FROM mysql.global_priv WHERE User = '';
        DELETE FROM mysql.db WHERE Db IN ('test', 'test\\_%');
        DROP DATABASE IF EXISTS test;
        FLUSH PRIVILEGES;" || die "cannot remove MariaDB's anonymous accounts and test database"
}

start_mariadb() {
    mkdir -p "$VAR/run" "$VAR/tmp"
    private_log_dir "$VAR/log"
    # Its temporary files (sorts, large results): root's alone too.
    chmod 700 "$VAR/tmp"
    if [ ! -d "$VAR/mysql/mysql" ]; then
        log "initialising MariaDB in $VAR/mysql"
        # Its own tmpdir: installs of several stacks at once must not share /tmp.
        local try
        for try in 1 2; do
            rm -rf "$VAR/mysql"
            private_log "$VAR/log/mysql-install.log"
            mariadb-install-db --no-defaults --datadir="$VAR/mysql" --tmpdir="$VAR/tmp" --user=root \
                --auth-root-authentication-method=socket --skip-test-db \
                >"$VAR/log/mysql-install.log" 2>&1 && break
            [ "$try" = 2 ] && die "mariadb-install-db failed (see $VAR/log/mysql-install.log)"
        done
    fi
    # mariadbd makes its socket 0777: it lives in the data directory (0700),
    # where only root (whom the API and the runner run as here) reaches it
    # from the moment it exists; run/mysql.sock, where every client looks for
    # it, is a link to it.
    chmod 700 "$VAR/mysql"
    if ! pid_alive "$VAR/run/mysql.pid"; then
        ln -sfn ../mysql/mysql.sock "$VAR/run/mysql.sock"
        # --skip-networking: reachable only through its own socket, never the system's.
        # AGENTHOST_MARIADB_OPTS: more options (later ones win), e.g. scripts/soak's caches.
        # The query cache answers the per-request key and agent look-ups (which
        # change rarely) without parsing or planning; a write to a table drops
        # that table's cached results at once, so a revoked key is never served.
        private_log "$VAR/log/mysql.log"
        with_oom_adj -500 mariadbd --no-defaults --datadir="$VAR/mysql" --socket="$VAR/mysql/mysql.sock" --tmpdir="$VAR/tmp" \
            --pid-file="$VAR/run/mysql.pid" --skip-networking --user=root \
            --log-error="$VAR/log/mysql.log" --innodb-buffer-pool-size=256M \
            --innodb-flush-log-at-trx-commit=2 --max-connections=500 --thread-handling=pool-of-threads \
            --query-cache-type=1 --query-cache-size=16M --performance-schema=OFF \
            --character-set-server=utf8mb4 --collation-server=utf8mb4_bin ${AGENTHOST_MARIADB_OPTS:-} \
            </dev/null >/dev/null 2>&1 &
        wait_for 60 MariaDB mysql_cli -e 'SELECT 1'
    fi
    harden_mariadb
}

# The checkout's own data files: a build's defaults are the installed layout's
# (lib/core/paths.h.in). Appended to a configuration written before they were
# needed too. The runner finds the build's agenthost-keeper by itself.
checkout_paths() {
    local conf=$VAR/agenthost.conf
    grep -q '^schema_dir' "$conf" || echo "schema_dir = $ROOT/schema" >>"$conf"
    grep -q '^tokenizer_vocab' "$conf" ||
        echo "tokenizer_vocab = $ROOT/lib/tokenize/data/cl100k_base.tiktoken" >>"$conf"
}

# create_database PASSWORD USERHOST: the database and its user, through mysql_cli.
create_database() {
    mysql_cli -e "CREATE DATABASE IF NOT EXISTS agenthost CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;
        CREATE USER IF NOT EXISTS 'agenthost'@'$2' IDENTIFIED BY '$1';
        ALTER USER 'agenthost'@'$2' IDENTIFIED BY '$1';
        GRANT ALL ON agenthost.* TO 'agenthost'@'$2';" || die "cannot create the database"
}

write_config() {
    local conf=$VAR/agenthost.conf
    [ -f "$conf" ] && { checkout_paths; return 0; }
    local pw; pw=$(head -c 18 /dev/urandom | base64 | tr -dc 'A-Za-z0-9')
    create_database "$pw" localhost
    write_config_file "$pw" "db_socket = $VAR/run/mysql.sock"
}

# write_config_file PASSWORD DB_LINES: $VAR/agenthost.conf for this checkout,
# reaching the database as DB_LINES says (a socket, or a cluster's db_hosts).
write_config_file() {
    local conf=$VAR/agenthost.conf pw=$1
    mkdir -p "$VAR/data" "$VAR/run"
    umask 077
    # HS256 shared secret for JWT logins (tests sign tokens with it).
    [ -s "$VAR/jwt.secret" ] || head -c 32 /dev/urandom | base64 | tr -d '\n' >"$VAR/jwt.secret"
    [ -s "$VAR/runner.secret" ] || head -c 32 /dev/urandom | base64 >"$VAR/runner.secret"
    cat >"$conf" <<CONF
# agenthost configuration (written by scripts/run; every key can be overridden by
# an AGENTHOST_<KEY> environment variable).
$2
db_name = agenthost
db_user = agenthost
db_password = $pw
master_key_file = $VAR/master.key
data_dir = $VAR/data
fcgi_socket = $VAR/run/api.sock
fcgi_invoke_socket = $VAR/run/api-invoke.sock
runner_socket = $VAR/run/runner.sock
# The runner also takes TCP (loopback, a free port; it registers the one it got)
# after a shared-secret handshake, so the API's TCP path is the one exercised.
runner_listen = 127.0.0.1:0
# The runner's Prometheus metrics (tests/integration/test_metrics.py scrapes them).
runner_metrics_listen = 127.0.0.1:$((PORT + 380))
runner_secret_file = $VAR/runner.secret
openapi_file = $BUILD/docs/openapi.json
invoke_workers = 16
# A call whose owner process was killed is recorded failed within this (the
# default is 10 s): the tests see it without waiting.
running_sweep_ms = 300
# A deploy waits for the runner's next look at the queue (the default is every
# second): the tests deploy a few hundred agents, each sooner at 100 ms.
deploy_poll_ms = 100
# Waits that are a minute or so in production, seconds here, so that the tests
# that wait them out take seconds (each test reads the value it waits for):
# at the sandbox budget a session idle this long gives way (60; well past the
# 3-4 s test_invoke_budget takes to fill the budget with sessions), a streamed call's
# keep-alive comment (15), an unknown JWT kid's refetch of the keys (60).
session_give_way_seconds = 20
stream_keepalive_seconds = 2
jwt_jwks_refetch_seconds = 5
# A bucket mount's rclone tries a failed request this many times (10): the
# SSRF test's refused redirect fails the read in seconds instead of 100 s.
mount_low_level_retries = 2
rate_limit_crud = 100
rate_limit_invoke = 10
# The integration tests deploy from git daemons (and test servers) they start on
# loopback, on ports PORT + 320 to PORT + 339 (18400-18419 for the test stack):
# only those may be cloned from the host's network. Every other host is cloned
# from a sandbox's network; link-local and metadata addresses never. Any local
# user may bind ports above 1023: on a shared host list git servers of your own
# on ports below 1024 instead (README, git_allow_hosts).
git_allow_hosts = 127.0.0.1:$((PORT + 320))-$((PORT + 339))
# Bucket endpoints: the tests' S3 and GCS servers listen on loopback, on ports
# PORT + 340 to PORT + 379: only those may be reached by bucket connections (an
# endpoint that redirects elsewhere on loopback is refused, as in production).
storage_allow_hosts = 127.0.0.1:$((PORT + 340))-$((PORT + 379))
# Webhooks: the tests' receivers listen on loopback, on ports PORT + 390 to
# PORT + 399, over plain http: only those may be reached by deliveries.
webhook_allow_hosts = 127.0.0.1:$((PORT + 390))-$((PORT + 399))
webhook_allow_http = true
sandbox_root = $VAR/data/sandboxes
# Smaller than the defaults (2 GiB, 10 GiB) so that the concurrency tests' ten
# sandboxes, the pool and the spares fit the host's sandbox budget (README) with
# room for other stacks on a developer's machine.
sandbox_memory_mb = 1024
sandbox_disk_mb = 1024
model_key_name = ANTHROPIC_API_KEY
price_input_per_mtok = 3.00
price_output_per_mtok = 15.00
# JWT logins: HS256 with the secret above (readable by root only). No JWKS URL:
# set jwt_jwks_url to your identity provider's. Whoever can serve keys at that URL
# can log in as any identity: the API refuses one on loopback, link-local or a
# port above 1023 of this host unless jwt_jwks_allow_local = true.
jwt_hs256_secret_file = $VAR/jwt.secret
jwt_issuer = https://idp.agenthost.test
jwt_audience = agenthost
CONF
    checkout_paths
    umask 022
}

admin() { AGENTHOST_CONFIG="$VAR/agenthost.conf" "$BUILD/lib/admin/agenthost-admin" "$@"; }

start_runner() {
    pid_alive "$VAR/run/runner.pid" && return 0
    local cmd="${RUNNER_BUILD:-$BUILD}/lib/runner/agenthost-runner"
    # The command line is kept so tests can restart a runner they killed.
    printf 'AGENTHOST_CONFIG=%q %q\n' "$VAR/agenthost.conf" "$cmd" >"$VAR/run/runner.cmd"
    private_log "$VAR/log/runner.log"
    AGENTHOST_CONFIG="$VAR/agenthost.conf" with_oom_adj -200 setsid "$cmd" \
        </dev/null >>"$VAR/log/runner.log" 2>&1 &
    echo $! >"$VAR/run/runner.pid"
}

# agenthost-webhooks, the webhook delivery daemon. Its command line is kept
# (run/webhooks.cmd) so tests can restart it with other settings.
start_webhooks() {
    pid_alive "$VAR/run/webhooks.pid" && return 0
    local cmd="$BUILD/lib/webhooks/agenthost-webhooks"
    printf 'AGENTHOST_CONFIG=%q %q\n' "$VAR/agenthost.conf" "$cmd" >"$VAR/run/webhooks.cmd"
    private_log "$VAR/log/webhooks.log"
    AGENTHOST_CONFIG="$VAR/agenthost.conf" setsid "$cmd" </dev/null >>"$VAR/log/webhooks.log" 2>&1 &
    echo $! >"$VAR/run/webhooks.pid"
}

start_api() {
    pid_alive "$VAR/run/api.pid" && return 0
    private_log "$VAR/log/api.log"
    AGENTHOST_CONFIG="$VAR/agenthost.conf" with_oom_adj -200 setsid "$BUILD/handlers/agenthost-api" \
        </dev/null >>"$VAR/log/api.log" 2>&1 &
    echo $! >"$VAR/run/api.pid"
    # An API that refuses its configuration (a JWKS URL any local user could
    # serve, say) says why in its log: shown here rather than a time-out.
    local n=200
    until test -S "$VAR/run/api.sock"; do
        pid_alive "$VAR/run/api.pid" || die "the API stopped at start: $(tail -n 1 "$VAR/log/api.log")"
        n=$((n - 1)); [ $n -le 0 ] && die "timed out waiting for the API socket"
        sleep 0.1
    done
}

# The checkout's nginx under $VAR/nginx. AGENTHOST_RUN_DIR: where the API's
# sockets are ($VAR/run unless set: a test's second nginx names the stack's).
# AGENTHOST_UPLOAD_BODY=streamed: presigned uploads streamed to the worker as
# in an install (nginx/upload-body-streamed.conf) instead of the checkout's
# hand-over of nginx's own body file (snippets/upload-body.conf).
# AGENTHOST_UPLOAD_CONN: uploads one client address may have open at once.
# nginx's allow lines for /metrics: AGENTHOST_METRICS_ALLOW, addresses or CIDRs
# separated by spaces (127.0.0.1 and ::1 unless set). AGENTHOST_NGINX_EXTRA: a
# file included in http{} after the site (scripts/bench-peers' peer servers).
metrics_allow() {
    local a out=
    for a in ${AGENTHOST_METRICS_ALLOW:-127.0.0.1 ::1}; do
        case $a in *[!0-9a-fA-F.:/]*) die "AGENTHOST_METRICS_ALLOW: not an address: $a" ;; esac
        out="${out}allow $a; "
    done
    printf '%s' "$out"
}

nginx_conf() {
    local d=$VAR/nginx
    local snip=$d/snippets run=${AGENTHOST_RUN_DIR:-$VAR/run} allow
    allow=$(metrics_allow) || exit 1
    mkdir -p "$snip" "$d/tmp"
    # access.log holds presigned URLs (their signatures): as private as $VAR/log.
    # nginx's master (root) opens them; its workers write through its fds.
    private_log_dir "$d/logs"
    private_log "$d/logs/access.log"
    private_log "$d/logs/error.log"
    local subst="s|@LISTEN@|${LISTEN_ADDR:-127.0.0.1}:$PORT|g; s|@API_SOCKET@|$run/api.sock|g;
                 s|@INVOKE_SOCKET@|$run/api-invoke.sock|g; s|@METRICS_SOCKET@|$run/api-metrics.sock|g; s|@SNIPPETS@|$snip|g;
                 s|@FILES_DIR@|${FILES_DIR:-$VAR/files}|g; s|@WWW@|$ROOT/nginx/www|g;
                 s|@FLOOD_RATE@|${AGENTHOST_FLOOD_RATE:-2000r/s}|g;
                 s|@FLOOD_BURST@|${AGENTHOST_FLOOD_BURST:-2000}|g;
                 s|@UPLOAD_CONN@|${AGENTHOST_UPLOAD_CONN:-10}|g;
                 s|@METRICS_ALLOW@|$allow|g"
    for f in "$ROOT"/nginx/snippets/*.conf "$ROOT"/nginx/agenthost-http.conf \
             "$ROOT"/nginx/agenthost-locations.conf; do
        sed "$subst" "$f" >"$snip/$(basename "$f")"
    done
    [ "${AGENTHOST_UPLOAD_BODY:-}" = streamed ] &&
        sed "$subst" "$ROOT/nginx/upload-body-streamed.conf" >"$snip/upload-body.conf"
    sed "$subst" "$ROOT/nginx/agenthost.conf" >"$d/site.conf"
    cat >"$d/nginx.conf" <<CONF
user www-data;
worker_processes auto;
pid $VAR/run/nginx.pid;
error_log $d/logs/error.log warn;
events { worker_connections 4096; }
http {
    # Buffered: one write per 64 KiB or per second, not one per request.
    access_log $d/logs/access.log combined buffer=64k flush=1s;
    client_body_temp_path $d/tmp/body;
    fastcgi_temp_path $d/tmp/fastcgi;
    proxy_temp_path $d/tmp/proxy;
    uwsgi_temp_path $d/tmp/uwsgi;
    scgi_temp_path $d/tmp/scgi;
    include /etc/nginx/mime.types;
$( [ "${AGENTHOST_TRUST_XFF:-0}" = 1 ] && printf '    set_real_ip_from 127.0.0.0/8;\n    real_ip_header X-Forwarded-For;\n' )
    include $d/site.conf;
$( [ -n "${AGENTHOST_NGINX_EXTRA:-}" ] && printf '    include %s;\n' "$AGENTHOST_NGINX_EXTRA" )
    # Reference for the benchmarks: nginx answering a static 200 by itself.
    server {
        listen ${LISTEN_ADDR:-127.0.0.1}:$((PORT + 1));
        access_log off;
        location / { return 200 "ok\n"; }
    }
}
CONF
}

start_nginx() {
    pid_alive "$VAR/run/nginx.pid" && return 0
    nginx_conf
    nginx -t -q -c "$VAR/nginx/nginx.conf" -p "$VAR/nginx" || die "nginx config test failed"
    (with_oom_adj -200 nginx -c "$VAR/nginx/nginx.conf" -p "$VAR/nginx" </dev/null) ||
        die "nginx did not start"
    wait_for 10 nginx curl -fsS "http://${LISTEN_ADDR:-127.0.0.1}:$PORT/api/v1/health"
}

# Benchmarks measure what an operator runs: the test configuration's quick
# sweep of calls in progress (300 ms) and deploy-queue poll (100 ms) are
# background work on every host that a figure should not carry, so a
# benchmark's stack takes the defaults (each key can be overridden by its
# AGENTHOST_<KEY> variable). Its deploys wait up to a second for the poll.
bench_settings() {
    export AGENTHOST_RUNNING_SWEEP_MS=10000 AGENTHOST_DEPLOY_POLL_MS=1000
}

start_stack() {
    mkdir -p "$VAR/run" "$VAR/data"
    private_log_dir "$VAR/log"
    # Strangers' code, images and builds: the runner's alone (it also sets this).
    chmod 700 "$VAR/data"
    # nginx's workers (www-data) must reach the FastCGI sockets under $VAR/run.
    chmod 755 "$VAR" "$VAR/run"
    start_mariadb
    write_config
    admin migrate >/dev/null || die "migrations failed"
    start_runner
    start_api
    start_webhooks
    start_nginx
}

# remove_cgroup_dirs NAME: the sandbox cgroups of a stopped runner (NAME and
# its slots' directories), in whichever hierarchy holds them. A runner killed
# outright leaves its sandboxes' slot directories behind, and only a runner
# with the same NAME that claims the same slot would clear them. rmdir takes
# only empty ones: a live sandbox's stay.
remove_cgroup_dirs() {
    remove_slot_leftovers "$1"
    find /sys/fs/cgroup -maxdepth 6 -type d -name "$1" -exec rmdir {} \; 2>/dev/null || true
}

# remove_slot_leftovers NAME: the same but NAME itself, which a runner of the
# host's sharing that parent still uses: what runners killed by the tests
# (test_runner_crash, ...) left in slots another runner held at the next
# one's sweep.
remove_slot_leftovers() {
    local d
    for d in $(find /sys/fs/cgroup -maxdepth 6 -type d -name "$1" 2>/dev/null); do
        find "$d" -mindepth 1 -depth -type d -exec rmdir {} \; 2>/dev/null || true
    done
}

stop_stack() {
    stop_pid "$VAR/run/nginx.pid" 10
    stop_pid "$VAR/run/api.pid" 30
    stop_pid "$VAR/run/webhooks.pid" 10
    stop_pid "$VAR/run/runner.pid" 30
    stop_pid "$VAR/run/mysql.pid" 60
}
