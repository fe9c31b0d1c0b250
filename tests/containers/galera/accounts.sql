-- The test accounts of the container cluster, with the passwords of tests/lab/accounts.py.
-- The tests inspect a node as root over its socket (docker exec); the relays' connections
-- come from the network's gateway, so every host is '%'.
-- The checkers' monitor user:
CREATE USER 'monitor'@'%' IDENTIFIED BY 'monitor-pw';
GRANT USAGE, PROCESS, REPLICATION CLIENT ON *.* TO 'monitor'@'%';
-- For the write-gap bench (bench/gap_containers.py): the application's account, the checker's
-- [node_admin], and the bench's own statements (its table, row checks, provider options).
CREATE DATABASE labdb;
CREATE USER 'app'@'%' IDENTIFIED BY 'app-pw';
GRANT ALL PRIVILEGES ON labdb.* TO 'app'@'%';
CREATE USER 'nodeadmin'@'%' IDENTIFIED BY 'nodeadmin-pw';
GRANT SUPER, PROCESS, REPLICATION CLIENT ON *.* TO 'nodeadmin'@'%';
GRANT SELECT ON mysql.wsrep_cluster_members TO 'nodeadmin'@'%';
CREATE USER 'bench'@'%' IDENTIFIED BY 'bench-pw';
GRANT ALL PRIVILEGES ON *.* TO 'bench'@'%';
