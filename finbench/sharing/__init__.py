"""Results as researchers share them: a card's page (`report_page`), agents compared on the same episodes
(`compare`), cards ranked (`leaderboard`), all read from card folders or rows.csv files (`submitted`) and
refused unless they come from one run."""
