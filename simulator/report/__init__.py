"""The leaderboard report: terminal table, Markdown, self-contained HTML, PNG plots and JSON."""
