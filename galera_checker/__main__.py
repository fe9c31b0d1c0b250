from galera_checker.cli import main

main()
