# klaw-weather/klaw_weather.py
async def weather(city: str) -> str:
    """The weather in a city now.

    Args:
        city: the city's name
    """
    return f"sunny in {city}"


def forecast(city: str, days: int = 3) -> str:
    """The weather in a city for the next days.

    Args:
        city: the city's name
        days: how many days ahead
    """
    return f"{days} days of rain in {city}"


TOOLS = [weather, forecast]
