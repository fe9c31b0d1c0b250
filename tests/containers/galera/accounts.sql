-- The test account of the container cluster: the checkers' monitor user, with the password
-- of tests/lab/accounts.py. The tests inspect a node as root over its socket (docker exec).
CREATE USER 'monitor'@'%' IDENTIFIED BY 'monitor-pw';
GRANT USAGE, PROCESS, REPLICATION CLIENT ON *.* TO 'monitor'@'%';
