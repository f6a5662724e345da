"""`KlawError`: the root of every error klaw raises on purpose, and the whole tree, drawn once.

`except KlawError` catches what klaw itself refused or could not do, each with a message written for
whoever reads it (the person, the model, a log); anything else is a bug. Each class keeps the
built-in base it had (`ValueError` for bad input, `RuntimeError` for a failed operation) as a second
base, so code that catches those behaves as before. tests/test_errors.py checks that this drawing
lists every error class in klaw, under its parent, and nothing else. (Three private exceptions that
never leave their module, for control flow, are not errors in this sense: `_Refused` in
gateway/link.py, `_EngineRunning` in cli/memory_forget_cmd.py, `_Spoiled` in store/sqlite/write_queue.py.)

* KlawError
  - ConfigError (ValueError) ............... config_loader: engine.yaml cannot be used; where, what, how to fix
  - StrictJsonError (ValueError) ........... strict_json: not a JSON document klaw accepts
  - YamlTooDeep ............................ yaml_syntax: lists or mappings nested too deeply (a yaml.YAMLError too)
  - YamlBadValue ........................... yaml_syntax: a value its tag cannot be built from (a yaml.YAMLError too)
  - LanguageError (ValueError) ............. home_language: a language code klaw init cannot use
  - HomeHeldError (RuntimeError) ........... home_lock: another process holds the home (an engine, or maintenance)
  - BackupError (RuntimeError) ............. home_backup: `klaw backup` cannot write its archive there
  - RestoreError (RuntimeError) ............ home_restore: `klaw restore` refused that archive or that folder
  - LlmError (RuntimeError) ................ llm/errors: a model call failed (model id, base URL, status)
    + LlmTimeoutError
    + LlmRateLimitError
    + LlmServerError
    + LlmConnectionError
    + LlmAuthError
    + LlmBadRequestError
    + LlmMalformedResponseError
    + UnknownModelError (ValueError) ....... llm/errors: a model id that is not configured
  - WireFormatError (ValueError) ........... llm/messages: a body not in the OpenAI wire format
  - CodingError (ValueError) ............... unpacking: a compressed answer klaw does not undo, or corrupt data
  - StorageError (RuntimeError) ............ store/errors: the store cannot do what was asked
    + IndexMismatchError ................... vectors of another embedder, or words of another tokenizer, are stored
    + StorageUnavailable ................... the database server cannot be reached now (worth retrying)
      * ServerUnreachable .................. no server answered (refused, timed out): a start retried later
    + StoreNotSetUp ........................ no klaw database there yet; an open not asked to create left it so
    + LeaseLostError ....................... store/lease_fence: a turn's write after another engine took its chat
    + CopyFormatError ...................... store/postgres/vector_copy: a chat's vectors not in the layout expected
    + TargetRefused ........................ store/rebuild_protocol: a move's target holds a home already (final)
  - EmbedderError (RuntimeError) ........... memory/embedder/protocol: no vectors; why and what to do
    + EmbedderUnavailable .................. its package is not installed: final, names the fix
    + WrongVectors ......................... memory/embedder/checked: a program's embedder= answered no contract vectors
  - MalformedLine (ValueError) ............. store/log_format: a log line that cannot be decoded
  - ExportTargetError (ValueError) ......... memory/kept_log_files: klaw log export's directory is not new or empty
  - CoreMemoryError (ValueError) ........... memory/core_memory: a refused update
  - ArchivalError (ValueError) ............. memory/archival_memory: a refused save or search
  - DetailsError (ValueError) .............. memory/conversation_details: nothing to show
  - ForgetError (ValueError) ............... memory/forget_targets: the target cannot be forgotten
  - EmptySummaryError (ValueError) ......... memory/summaries/prompts: the model answered no text
  - ReindexError (RuntimeError) ............ memory/reindex: reindex cannot run
    + EngineRunningError ................... an engine serves the home
  - InvalidTaskName (ValueError) ........... scheduling/names
  - InvalidSchedule (ValueError) ........... scheduling/schedules
  - DuplicateTask (ValueError) ............. scheduling/task_store
  - SchedulerFileTooNew (RuntimeError) ..... scheduling/task_store: scheduler.db of a newer klaw, left untouched
  - SkillPathError (ValueError) ............ tools/skills/skill_files: a skill file that may not be read
  - FrameError (ValueError) ................ engine/frames: a line that is not a valid frame
  - MessageRefused (ValueError) ............ message_text: a message no log can hold, or too long; nothing stored
    + IdUsedByAnotherChat .................. memory/ingestion: its id is another chat's message's; nothing stored
    + IdUsedForAnotherText ................. message_text: its id is the chat's message with other words (503)
  - QueryError (ValueError) ................ engine/frame_dispatch: a query that cannot be answered
  - SettingError (ValueError) .............. engine/memory_settings: a `/rag set` that cannot be applied
  - TaskBusy (ValueError) .................. engine/subagents: a run of the task is in progress
  - TaskRunRefused (ValueError) ............ library_tasks: `Klaw.run_task` started no run; why (decision 540)
  - CommandRefused (ValueError) ............ tools/host/patterns: a command host_exec may not run; why
  - Outside ................................ tools/beneath: a path leading out of the workspace (a PermissionError too)
  - SandboxInstallError (RuntimeError) ..... tools/sandbox/venv: packages not installed; pip's words
  - NoSlot (RuntimeError) .................. tools/sandbox/run_slots: every sandbox slot stayed taken; code not run
  - PluginImportHangs (RuntimeError) ....... tools/plugin_import: a plugin's import not finished in time; left out
    + PluginProviderHangs .................. a plugin's provider not returned in time; left out (decision 540)
  - EngineStopping (RuntimeError) .......... engine/failures: shutting down, no new messages
  - EngineSocketError (RuntimeError) ....... engine/socket_file: the socket could not be set up
    + EngineAlreadyRunningError ............ another engine serves the home
  - BufferUnavailable (RuntimeError) ....... gateway/buffer: the buffer's disk refused a message
  - EngineUnavailable (RuntimeError) ....... gateway/link: the engine is not connected
    + EngineRefusedConnection .............. the engine refused the gateway's connection; its words
  - EngineRefused .......................... engine/one_query: the engine refused a connection (a ConnectionError too)
  - TelegramTokenRefused (RuntimeError) .... channels/telegram: Telegram refused the bot token at start
  - QueryFailed (RuntimeError) ............. gateway/link: the engine refused a query
  - TurnFailed (RuntimeError) .............. library: the turn behind `Klaw.ask` failed (its error id)
  - TurnStopped (RuntimeError) ............. engine/turn_runner: a forget on another engine stopped the turn; its words
  - EngineNotOpen (RuntimeError) ........... library: the agent used before `start` or after `aclose`; which
  - OtherEventLoop (RuntimeError) .......... library_loop: a `Klaw` called on another loop than its start's (538)
  - HomeUnusable ........................... library_start: `Klaw(home)` names a file, or no folder it can make
  - InvalidChat (ValueError) ............... library_arguments: a `chat` argument that names no chat
  - OwnTurnRunning (RuntimeError) .......... library_own_turn: a tool's ask would wait for its own turn, or its aclose
  - InvalidArgument ....................... library_arguments: an argument Klaw or a method does not take (a TypeError)
  - ToolDefinitionError (ValueError) ....... tools/schema: a function that cannot be offered as a tool; the fix
    + DuplicateToolName .................... tools/registry: a name another tool has (which group's, when a group's)
  - BadArguments (ValueError) .............. tools/schema: the model's arguments do not fit the tool's schema
  - ToolRefusal (RuntimeError) ............. tools/calls: an expected refusal; its message is the whole result
    + WebError (ValueError) ................ tools/web/errors: a page or search that gave no text, and why
      + AddressRefused ..................... the address guard forbids where a URL leads
  - MissingVariable (RuntimeError) ......... tools/mcp/transport: a variable an MCP server's config names is unset
  - AnswerTooLong (RuntimeError) ........... tools/mcp/http_answers: a URL MCP server's answer past 16 MB (decision 309)
  - MemoryUnavailable (RuntimeError) ....... mcp_server/memory_link: klaw mcp serve cannot reach the engine
  - SearchProblem .......................... cli/memory_cmd: which chat to search, for the person to fix
  - LocomoFormatError (ValueError) ......... bench/locomo/dataset: not a LoCoMo-format file
  - LocomoRunError (RuntimeError) .......... bench/locomo/runner: no honest figures from this run
  - PastSessionsRunError (RuntimeError) .... bench/locomo/past_sessions_chat: no honest figures
"""

from __future__ import annotations

__all__ = ["KlawError"]


class KlawError(Exception):
    """Something klaw refused or could not do; the message says what, and what to do about it."""
