"""Technical filler for the assistant-sessions dataset: per topic, a few
questions a user might ask and the paragraphs an assistant's long answer is
built from. Written for this dataset; see README.md."""

TOPICS = {
    "testing": {
        "asks": [
            "How should I structure the tests for this part so they stay fast?",
            "What is a good way to test code that talks to the network?",
            "My test suite is getting slow. Where would you start?",
        ],
        "paras": [
            "Keep the bulk of the tests at the unit level, where a function gets plain values in and hands plain values back. Anything that touches a clock, a socket or the file system should receive that dependency as a parameter, so the test can pass a fixed clock or an in-memory buffer instead. That alone usually removes most of the slowness and almost all of the flakiness people see in a growing suite.",
            "For the code that really does cross a process boundary, write a smaller set of integration tests that start the real component on a loopback address or in a temporary directory. Give every test its own directory and its own port chosen by the operating system, so the tests can run in parallel without stepping on each other, and clean up in a drop guard or a fixture finaliser rather than at the end of the test body.",
            "When a suite gets slow, measure before changing anything: most runners can print the duration of each test, and the slowest ten are nearly always responsible for more than half of the time. Typical culprits are sleeps used as synchronisation, fixtures that rebuild a database for every test, and tests that exercise the same expensive setup again and again when a shared read-only fixture would do.",
            "Property-based tests are worth adding where a function has a clear invariant, such as a parser that must round-trip or a sorter that must keep every element. A few hundred generated cases find the edge cases that hand-written examples miss, and a failing case is shrunk to a minimal input that makes the bug obvious.",
        ],
    },
    "ci": {
        "asks": [
            "Can you help me set up a CI pipeline for this?",
            "The CI run takes twenty minutes. How can I make it quicker?",
            "What should the pipeline check before a merge?",
        ],
        "paras": [
            "A pipeline that earns its keep runs the same commands a developer runs locally: format check, linter with warnings as errors, the unit tests, then the integration tests. Put those commands in one script in the repository and have the CI configuration call that script, so the pipeline and the laptop cannot drift apart and a failure can be reproduced by running one file.",
            "Caching is where most of the time goes. Cache the dependency downloads keyed by the lock file, and the build output keyed by the lock file plus the toolchain version. Split slow jobs so that the linter and the unit tests report within a few minutes, while the longer integration suite runs in parallel and only blocks the merge, not the feedback.",
            "Before a merge the pipeline should at least prove that the code builds from a clean checkout, that every test passes, and that the artefact you would ship can actually start. A smoke step that launches the built binary or container and hits a health endpoint catches a surprising number of configuration mistakes that unit tests never see.",
        ],
    },
    "git": {
        "asks": [
            "I messed up my git history on a feature branch. How do I clean it up?",
            "What branching model would you suggest for a small team?",
            "How do I find which commit introduced a bug?",
        ],
        "paras": [
            "On a branch that nobody else has pulled, an interactive rebase is the cleanest tool: reorder the commits, squash the fix-ups into the commits they fix, and reword messages so each one says why the change was made. If you are unsure, create a backup branch first; a rebase never deletes the old commits, and the reflog keeps them reachable for weeks.",
            "For a small team, trunk-based development with short-lived branches works better than long-running release branches. Each branch lives a day or two, is reviewed, and merges once the pipeline is green. Feature flags cover work that is not ready to be switched on, so unfinished code can still merge without blocking anyone.",
            "To locate a regression, git bisect does a binary search over the history: mark a known good and a known bad commit, and git checks out the midpoint for you to test. If you can express the check as a script that exits non-zero on failure, git bisect run finds the culprit without any further input, even across hundreds of commits.",
        ],
    },
    "docker": {
        "asks": [
            "How do I make my Docker image smaller?",
            "Should I run the database in a container as well?",
            "What is the right way to pass secrets into the container?",
        ],
        "paras": [
            "A multi-stage build is the main lever for image size: compile in a full toolchain image, then copy only the finished artefact into a slim runtime image. Order the instructions so that the layers which change least, such as dependency installation, come first; then a code change only rebuilds the last few layers and pushes a few megabytes instead of hundreds.",
            "Running the database in a container is fine for development and tests, where a throwaway instance per run is exactly what you want. In production the question is less about containers and more about where the data lives: mount a volume on durable storage, take backups that you have actually restored once, and pin the database image to an exact version.",
            "Secrets should reach the process at run time, never at build time, because anything in a build argument or a copied file ends up in an image layer that anyone with the image can read. Use the orchestrator's secret mechanism or environment variables injected by the platform, and make the application refuse to start with a clear message when a required secret is missing.",
        ],
    },
    "performance": {
        "asks": [
            "This function is too slow on large inputs. How do I approach it?",
            "How do I profile this properly?",
            "Is it worth adding a cache here?",
        ],
        "paras": [
            "Start with a profile of a realistic workload rather than a guess. A sampling profiler shows where the time really goes, and the answer is often an innocent-looking helper called in a loop, an allocation per element, or a lookup that scans a list where a hash map would do. Fix the top item, measure again, and stop when the remaining time is spread thinly.",
            "Complexity matters more than micro-optimisation: turning a quadratic pass into a sort followed by a linear scan beats any amount of tuning inside the loop. Once the algorithm is right, look at memory access patterns; keeping the hot data contiguous and avoiding pointer chasing often gives another factor of two or three on modern processors.",
            "A cache pays off when the same expensive result is requested repeatedly and can be keyed exactly. The hard part is invalidation: decide what changes a result, put all of it into the key, and bound the size so the cache cannot grow without limit. Measure the hit rate after deploying it; a cache with a low hit rate only adds memory and complexity.",
        ],
    },
    "errors": {
        "asks": [
            "How should I handle errors in this module?",
            "Users get a stack trace when the config file is wrong. What is better?",
            "Should I retry when this call fails?",
        ],
        "paras": [
            "Separate errors the caller can act on from errors that only a developer can fix. The first kind deserve their own types or variants with enough context to produce a helpful message, such as which file and which line was wrong. The second kind can be wrapped with context and propagated to the top, where they are logged once with everything needed to debug them.",
            "A configuration error should be reported in the user's terms: the name of the setting, the value that was given, and what would have been accepted. Validate the whole configuration at start-up and report every problem at once instead of failing on the first, so a person fixing the file does not have to restart ten times.",
            "Retries help with transient failures such as a timeout or a connection reset, and hurt with permanent ones such as a rejected credential. Retry only idempotent operations, use exponential backoff with jitter, cap the number of attempts, and make sure the caller can see that a retry happened, for example through a counter in the metrics.",
        ],
    },
    "database": {
        "asks": [
            "How should I design the tables for this?",
            "The query is slow once the table has a few million rows. Why?",
            "How do I migrate the schema without downtime?",
        ],
        "paras": [
            "Model the tables around the questions the application asks most often. Give every table a stable primary key, add foreign keys so the database enforces the relationships you rely on, and store timestamps in UTC. Normalise first; denormalise only a specific column once a measured query needs it, and document why that copy exists.",
            "A query that slows down with table size is almost always doing a sequential scan. Run it with the planner's explain output and look for the scan node; an index on the filtered columns, in the order they are compared, usually fixes it. Check also for functions applied to indexed columns in the where clause, which stop the planner from using the index at all.",
            "Schema changes without downtime follow an expand and contract pattern: add the new column or table in a way that old code ignores, deploy code that writes to both, backfill in small batches, switch reads to the new shape, and only then remove the old one. Each step is a separate, reversible deployment, which keeps a failed step cheap.",
        ],
    },
    "api": {
        "asks": [
            "How should I version this API?",
            "What status codes should the endpoints return?",
            "How do I paginate this list endpoint?",
        ],
        "paras": [
            "Version an API only when you must break it, and prefer additive changes that old clients ignore: new optional fields, new endpoints, new enum values that clients are told to tolerate. When a break is unavoidable, put the version in the path or a header, run both versions side by side for a published period, and measure which clients still call the old one before removing it.",
            "Status codes should let a client decide what to do without parsing the message: 400 for a malformed request, 401 when no valid credential was given, 403 when the credential is valid but not allowed, 404 for a missing resource, 409 for a conflict with the current state, and 5xx only for failures on the server's side. Pair each with a machine-readable error code and a human-readable message.",
            "Cursor pagination holds up better than offsets on lists that change while someone is paging: return an opaque cursor encoding the sort key of the last item, and let the client pass it back to continue. The page stays stable when rows are inserted before it, and the database can seek straight to the cursor with an index instead of counting past skipped rows.",
        ],
    },
    "security": {
        "asks": [
            "How do I store user passwords safely?",
            "What should I check before exposing this service to the internet?",
            "How do I keep dependencies from introducing vulnerabilities?",
        ],
        "paras": [
            "Store passwords only as slow, salted hashes from a dedicated algorithm such as Argon2id, with parameters tuned so one hash takes tens of milliseconds on your server. Never log passwords or tokens, compare secrets in constant time, and rate-limit login attempts per account and per address so a leaked list cannot be tried quickly.",
            "Before exposing a service, make sure every endpoint requires authentication unless it is deliberately public, that TLS terminates with a current configuration, and that error messages do not leak internal paths or stack traces. Put request size limits and timeouts in place, and run the service as an unprivileged user with only the file system access it needs.",
            "For dependencies, keep a lock file in the repository, run an audit tool in the pipeline that checks the lock file against the advisory database, and update on a schedule rather than only when something breaks. Fewer dependencies is the strongest control: each one removed is code that can no longer be compromised.",
        ],
    },
    "logging": {
        "asks": [
            "What should I log in this service?",
            "How do I add metrics without slowing things down?",
            "Our logs are too noisy to be useful. Any advice?",
        ],
        "paras": [
            "Log events that an operator would act on or need during an incident: start-up with the effective configuration minus secrets, each request's outcome with its duration and a request id, and every error with enough context to find its cause. Use structured logs with stable field names, so they can be searched and aggregated instead of read line by line.",
            "Metrics are cheap when they are counters and histograms updated in memory and scraped periodically. Count requests by route and status, record latency in a histogram with buckets that bracket your targets, and expose queue lengths and pool usage as gauges. Avoid labels with unbounded values, such as user ids, which multiply the number of series.",
            "Noisy logs usually come from logging at the wrong level: routine success at info or warn, or the same failure logged at every layer it passes through. Log an error once, where it is handled, and demote chatter to debug. Sampling repetitive messages keeps the signal visible during an outage, when the volume is highest.",
        ],
    },
    "concurrency": {
        "asks": [
            "I get a race condition sometimes. How do I track it down?",
            "Should I use threads or async for this?",
            "How do I limit how many jobs run at the same time?",
        ],
        "paras": [
            "Intermittent races are easiest to find by making them frequent: run the suspect test in a loop with many threads, add a stress mode that inserts small random delays, and use a race detector or a sanitizer where the language offers one. Once reproduced, look for shared state touched outside a lock, or a check and an update that are not done atomically.",
            "Async pays off when the program spends most of its time waiting on many sockets at once, such as a server with thousands of idle connections. For work that is mostly computation, or for a handful of concurrent tasks, plain threads or a thread pool are simpler to write and debug, and they avoid blocking an event loop by accident.",
            "A semaphore or a bounded worker pool caps concurrency: each job acquires a permit before it starts and releases it when it finishes, so at most N run at once while the rest wait in a queue. Bound the queue as well, and decide what happens when it is full, either waiting, rejecting with a clear error, or shedding the oldest work.",
        ],
    },
    "packaging": {
        "asks": [
            "How do I package this so others can install it easily?",
            "What should go in the README for the first release?",
            "How do I pick a version number for the next release?",
        ],
        "paras": [
            "Ship the tool through the ecosystem's ordinary package manager first, since that is where users will look and it handles updates for them. Add prebuilt archives for the main platforms on the release page for people without the toolchain, each with a checksum file, and make the release job build them from the tagged commit so they are reproducible.",
            "A first README needs four things: one sentence saying what the project does and for whom, the install command, a minimal example that works when pasted, and where to report problems. Configuration details, design notes and the changelog can live in separate files linked from there.",
            "Semantic versioning works well if you treat it as a promise: bump the major version for anything that breaks existing users, the minor version for additions, and the patch version for fixes. Before 1.0 the minor version carries breaking changes; write a short changelog entry for each release so users can see what moved.",
        ],
    },
    "frontend": {
        "asks": [
            "The screen re-renders too often. How do I stop that?",
            "How should I organise the components?",
            "How do I handle forms with validation nicely?",
        ],
        "paras": [
            "Excess re-rendering usually comes from new object or function identities created on every render and passed down as props, or from a piece of global state that many components subscribe to when each needs only a slice. Memoise the expensive children, select narrow slices of the store, and confirm with the profiler that the change actually reduced the renders.",
            "Organise components by feature rather than by type: a folder per screen or domain with its components, hooks and tests together, and a small shared folder for truly generic pieces such as buttons and layout primitives. Keep data fetching near the top of a feature and pass plain values down, so most components stay easy to test.",
            "For forms, keep the field values in one place, validate on blur and on submit rather than on every keystroke, and show the message next to the field it concerns. Define the validation rules once in a schema shared with the server where possible, so the client and the API never disagree about what is valid.",
        ],
    },
    "data": {
        "asks": [
            "How do I clean this messy dataset?",
            "My notebook is getting out of hand. How do I organise the analysis?",
            "How do I deal with missing values here?",
        ],
        "paras": [
            "Cleaning goes faster when each step is a small function that takes a data frame and returns a new one: parse types, normalise column names, drop exact duplicates, then handle outliers with a rule you can state. Chain them in one pipeline and keep the raw input untouched on disk, so any step can be changed and rerun from the beginning.",
            "Move stable code out of the notebook into a module with tests, and keep the notebook for exploration and figures that call into that module. Pin the environment in a lock file, and record the input file's checksum at the top of the analysis, so a result can be traced back to exactly the data and code that produced it.",
            "Missing values need a decision per column, not a global fill: a sensor that was offline is different from a reading of zero. Look at where the gaps fall in time, mark imputed values in a separate boolean column, and compare the main result with and without imputation to show that the conclusion does not depend on it.",
        ],
    },
}
