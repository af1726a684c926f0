"""The Slack platform (slack-bolt 1.30, slack-sdk 3.48). Import ``platforms.slack.platform``;
this package imports nothing, so that ``platforms.slack.config`` brings in no SDK."""
