"""CodeContests (and HumanEval) on top of the sandbox: loading problems, extracting code from answers,
checking outputs with the official harness's rules, and rendering RLEF-style execution feedback."""
