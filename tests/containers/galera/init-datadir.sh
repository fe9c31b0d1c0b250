#!/bin/sh
# Makes the node image's datadir: the test accounts, then a one-node Galera cluster bootstrapped
# and shut down cleanly. Every container of the image then starts at the same Galera position
# (cluster uuid and seqno, in grastate.dat and in InnoDB), so a joiner catches up by IST from
# the bootstrap node's gcache instead of a full SST.
set -eu
datadir=/var/lib/galera
mariadb-install-db --user=root --datadir="$datadir" --skip-test-db \
    --auth-root-authentication-method=socket > /dev/null
mariadbd --user=root --skip-networking --wsrep-new-cluster \
    --wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:4567" &
server=$!
tries=0
until mariadb -e 'SELECT 1' > /dev/null 2>&1; do
    tries=$((tries + 1))
    if [ "$tries" -gt 120 ]; then echo "mariadbd did not start" >&2; exit 1; fi
    kill -0 "$server"
    sleep 0.5
done
mariadb < /usr/local/share/galera-node/accounts.sql
mariadb-admin shutdown
wait "$server"
grep -q '^safe_to_bootstrap: 1' "$datadir/grastate.dat"
