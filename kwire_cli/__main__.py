from kwire_cli.cli import main

main()
