"""What happens to a question while nobody answers it: timers, expiry, escalation, reminders."""
