"""Views: what one page draws, a module per page (Experiments has two). A view imports parts, state and
chrome, never another view: what two pages share is a part, what they exchange is state."""
