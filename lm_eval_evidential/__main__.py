from lm_eval_evidential.cli import main

raise SystemExit(main())
