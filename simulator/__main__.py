from duplexsim.cli import main

raise SystemExit(main())
