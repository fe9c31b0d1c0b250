from gr_checker.cli import main

main()
