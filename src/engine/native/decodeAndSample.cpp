// modelhost's additions to node-llama-cpp's addon, compiled into it by `modelhost engine build`
// (src/engine/native/addonPatch.ts copies this file into node-llama-cpp's llama/addon folder, whose
// CMakeLists compiles every addon/*.cpp, and registers the functions in addon.cpp; it also sends
// node-llama-cpp's own llama_decode through modelhostDecode, so every decode runs on DecodeThread).
//
// Why: a decode step of BatchDecoder is one llama_decode and then one sample per generating
// sequence. Through node-llama-cpp's own methods that is 1 + n tasks on the libuv pool, each a
// hand-over to a pool thread and back to the event loop. Sampling here is exactly node-llama-cpp's
// (AddonContextSampleTokenWorker without metadata): the sampler's chain, its grammar, then
// acceptToken. docs/performance.md has the figures.
//
// modelhostDecodeAndSample(context: AddonContext, batchIndexes: Int32Array, samplers: AddonSampler[])
//   -> Promise<Int32Array>: decodes the context's batch and samples each batch index in one task:
//   the token sampled at each index, -1 where none could be.
//
// modelhostGenerate(context, batchIndexes, samplers, sequenceIds: Int32Array, positions: Int32Array,
//                   endTokens: Int32Array, maxSteps: number, control: Int32Array,
//                   onSteps: (tokens: Int32Array) => void) -> Promise<number>
//   The same first step, then keeps going without the event loop: each sampled token is decoded
//   as its sequence's next input (at positions[i], positions[i] + 1, … in sequenceIds[i]) and
//   sampled again, and the steps' tokens reach onSteps, in order, while the next step decodes: one
//   call with every step decoded since the last (n tokens a step, step after step).
//   Between two steps the decode thread does not wait for the event loop: on the tiny test model a
//   step is ~35 µs and a round trip through the event loop ~30 µs more. It stops before a step
//   when control[0] is non-zero (JavaScript's way to take the context back: new work, a consumer
//   that stopped or fell behind), after maxSteps more steps, after a token that was not sampled
//   (-1), is an end of generation or is in endTokens, after SLICE_US if other work waits for the
//   decode thread (another model's decodes get a turn), and when the event loop has taken nothing for
//   MAX_WAIT. The first step reaches onSteps at once; later steps are held for up to control[1]
//   µs (see deliver), and the loop runs at most LEAD_STEPS ahead of the event loop. Resolves to
//   the number of steps; onSteps has seen them all by then.
//
// modelhostTrimMemory() -> boolean
//   Gives the free memory of every malloc arena back to the system (glibc's malloc_trim(0));
//   false where the C library has none. Loading a model frees much of what it took on the libuv
//   thread that loaded it (node-llama-cpp reads the file's metadata and vocabulary again there to
//   estimate its memory), and glibc keeps a thread arena's free pages: ~68 MiB of the Qwen2.5-0.5B
//   shape's resident memory, freed but held, when its first request had been served
//   (`gdb -p PID -batch -ex 'call (int)malloc_trim(0)'`: RssAnon 353 → 285 MiB).

#include <pthread.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/common.h"
#include "AddonContext.h"
#include "AddonModel.h"
#include "AddonSampler.h"
#include "globals/addonLog.h"
#include "mtmd-helper.h"
#include "mtmd.h"

namespace {

// How long one modelhostGenerate task keeps the decode thread while other work waits for it (another
// model's decode, or a prompt node-llama-cpp decodes): ~1,400 tiny-model steps, or twelve on the
// bench model (~4 ms a step). While nothing waits, the task goes on: each end of a task costs a
// round trip through the event loop before the next starts. One stream of the bench model (step
// times traced in the server) took 4.09 ms a step within a task and 4.63 ms across the end of one,
// 0.54 ms lost every 5.3 steps with 20 ms slices (2.5% of its speed; 1% with 50 ms slices).
constexpr int64_t SLICE_US = 50000;

// How many steps the loop may have decoded that the event loop has not yet taken before it waits
// for it. Without a bound the loop kept both cores busy (the pool thread and its OpenMP partner)
// and the event loop, woken for each step, waited for a core: on the tiny model it took its tokens
// in bursts of 14 to 78 steps, 3-8 ms apart, and a stream's first token came 4 ms later than with
// a round trip per step. Waiting here frees a core exactly when the event loop is behind. Within
// the bound the loop holds steps back to hand several over at once (control[1], --stream-hold):
// on the tiny model, one stream, modelhost ÷ llama-server went 0.76x (a hand-over per step, 2
// ahead), 1.06x (up to 8 steps a hand-over), 1.26x (up to 16). BatchDecoder's MAX_TOKENS_AHEAD
// (how far a consumer may fall behind) is larger, so one hand-over never stops the loop by itself.
constexpr size_t LEAD_STEPS = 16;

// The longest it waits: past this the event loop is busy with something else, and the task ends
// (JavaScript starts the next step when it can).
constexpr auto MAX_WAIT = std::chrono::milliseconds(20);

// Every llama_decode of the process runs on one thread, the decode thread, not on whichever libuv
// pool thread took the task: this file's tasks are queued to it straight from the event loop
// (DecodeTask), and the build patches node-llama-cpp's decode (prompts, embeddings, ranking) to
// call modelhostDecode below, whose pool thread waits (asleep) until it is done.
// Why: with OpenMP, ggml's threads belong to the thread that computes, so each pool thread that
// decoded had a team of its own (a stream's slices landed on all 4). Once libgomp manages more
// threads than there are CPUs it stops spinning at its barriers after ~100 turns and sleeps in the
// kernel instead, for every one of the graph's hundreds of operations. On the bench model, one
// stream, the server did 150-245 tok/s, varying from request to request, against 268-287 with
// UV_THREADPOOL_SIZE=1 and 235-272 for llama-server, which decodes on one thread as llama-bench
// does. With a team per model instead, the tiny model did ~35 steps in 50 ms, not ~1,400, once
// the bench model had run. Two models' steps take turns, a slice at a time.
class DecodeThread {
    public:
        // Runs `work` (which must not throw) on the decode thread, and returns when it is done.
        static void run(const std::function<void()>& work) {
            std::mutex doneMutex;
            std::condition_variable doneChanged;
            bool done = false;
            post([&] {
                work();
                // Notified under the lock: the waiter cannot return (and take these away) before it is released.
                std::lock_guard<std::mutex> lock(doneMutex);
                done = true;
                doneChanged.notify_one();
            });
            std::unique_lock<std::mutex> lock(doneMutex);
            doneChanged.wait(lock, [&] { return done; });
        }

        // Queues `work` (which must not throw) for the decode thread, and returns at once.
        static void post(std::function<void()> work) {
            DecodeThread& thread = instance();
            {
                std::lock_guard<std::mutex> lock(thread.mutex);
                thread.tasks.push_back(std::move(work));
                thread.waiting.store(thread.tasks.size(), std::memory_order_relaxed);
            }
            thread.wake.notify_one();
        }

        // Whether another task waits for the decode thread (read by the task running on it).
        static bool othersWaiting() { return instance().waiting.load(std::memory_order_relaxed) > 0; }

    private:
        std::mutex mutex;
        std::condition_variable wake;
        std::deque<std::function<void()>> tasks;
        std::atomic<size_t> waiting{0};

        static DecodeThread& instance() {
            static DecodeThread& thread = *new DecodeThread();  // never freed: it may still wait at the process's exit
            return thread;
        }

        DecodeThread() { std::thread([this] { serve(); }).detach(); }

        void serve() {
            pthread_setname_np(pthread_self(), "llama decode");
            std::unique_lock<std::mutex> lock(mutex);
            for (;;) {
                wake.wait(lock, [this] { return !tasks.empty(); });
                std::function<void()> task = std::move(tasks.front());
                tasks.pop_front();
                waiting.store(tasks.size(), std::memory_order_relaxed);
                lock.unlock();
                task();
                task = nullptr;  // what it holds goes before the lock is taken again
                lock.lock();
            }
        }
};

// llama_decode of the context's batch; nullptr or why it failed.
const char* decodeBatch(AddonContext* ctx) {
    ctx->sharedSamplerData.gotLogit = false;
    ctx->sharedSamplerData.hasLogits = false;
    int r = llama_decode(ctx->ctx, ctx->batch);
    if (r != 0) {
        return r == 1 ? "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)" : "Eval has failed";
    }
    llama_synchronize(ctx->ctx);
    return nullptr;
}

// Samples batchIndexes[i] with samplers[i] into tokens[i] (-1: nothing survived the chain);
// nullptr or why none could be sampled.
const char* sampleEach(AddonContext* ctx, const std::vector<int32_t>& batchIndexes, const std::vector<AddonSampler*>& samplers, std::vector<int32_t>& tokens) {
    for (size_t i = 0; i < batchIndexes.size(); i++) {
        tokens[i] = -1;
        AddonSampler* sampler = samplers[i];
        sampler->rebuildChainIfNeeded();

        std::unique_lock<std::mutex> samplingLock(ctx->sharedSamplerData.mutex);
        if (!ctx->sharedSamplerData.gotLogit) {
            ctx->sharedSamplerData.hasLogits = llama_get_logits(ctx->ctx) != nullptr;
            ctx->sharedSamplerData.gotLogit = true;
        }
        if (!ctx->sharedSamplerData.hasLogits) {
            return "This model does not support token generation";
        }

        llama_token_data_array cur_p;
        sampler->sampleAndReleaseLock(ctx->sharedSamplerData.mutex, samplingLock, ctx->ctx, batchIndexes[i], cur_p, false);
        if (cur_p.size == 0 || !(cur_p.selected >= 0 && cur_p.selected < (int32_t)cur_p.size)) {
            continue;
        }

        const llama_token token = cur_p.data[cur_p.selected].id;
        sampler->acceptToken(token);
        tokens[i] = token;
    }
    return nullptr;
}

// The arguments both functions start with: the context, and the batch indexes to sample with their samplers.
struct StepArguments {
    AddonContext* ctx;
    std::vector<int32_t> batchIndexes;
    std::vector<AddonSampler*> samplers;
};

StepArguments readStepArguments(const Napi::CallbackInfo& info, const char* usage) {
    Napi::Env env = info.Env();
    if (info.Length() < 3 || !info[0].IsObject() || !info[1].IsTypedArray() || !info[2].IsArray()) {
        throw Napi::TypeError::New(env, usage);
    }
    AddonContext* ctx = Napi::ObjectWrap<AddonContext>::Unwrap(info[0].As<Napi::Object>());
    if (ctx->disposed || !ctx->has_batch) {
        throw Napi::Error::New(env, "The context is disposed or has no batch");
    }
    Napi::Int32Array indexArray = info[1].As<Napi::Int32Array>();
    Napi::Array samplerArray = info[2].As<Napi::Array>();
    if (indexArray.ElementLength() != samplerArray.Length()) {
        throw Napi::RangeError::New(env, "batchIndexes and samplers differ in length");
    }
    StepArguments args{ctx, std::vector<int32_t>(indexArray.ElementLength()), std::vector<AddonSampler*>(samplerArray.Length())};
    for (size_t i = 0; i < args.batchIndexes.size(); i++) {
        args.batchIndexes[i] = indexArray[i];
        args.samplers[i] = Napi::ObjectWrap<AddonSampler>::Unwrap(samplerArray.Get(static_cast<uint32_t>(i)).As<Napi::Object>());
        if (args.samplers[i] == nullptr || args.samplers[i]->disposed) {
            throw Napi::Error::New(env, "A sampler is disposed");
        }
    }
    return args;
}

// Holds the context and samplers for the length of a task.
class StepReferences {
    public:
        explicit StepReferences(const StepArguments& args) : args(args) {
            args.ctx->Ref();
            for (AddonSampler* sampler : args.samplers) sampler->Ref();
        }
        ~StepReferences() {
            args.ctx->Unref();
            for (AddonSampler* sampler : args.samplers) sampler->Unref();
        }
        StepArguments args;
};

Napi::Int32Array toInt32Array(Napi::Env env, const int32_t* values, size_t count) {
    Napi::Int32Array result = Napi::Int32Array::New(env, count);
    std::copy(values, values + count, result.Data());
    return result;
}

// A task the event loop hands straight to the decode thread, whose outcome (and, for a generation,
// whose steps) come back through a thread-safe function: no libuv pool thread takes part. As
// Node-API async work, a pool thread took each task only to hand it to the decode thread and sleep
// until it was done: two more thread wakes a task (each a futex wake of a thread that may have been
// asleep on an idle CPU), and one pool thread held for as long as a generation ran. The first
// token of a stream after a pause came sooner without them (medians of alternating rounds against
// the pool-thread build): tiny model 5.0 against 8.0 ms (31 rounds, 100 ms apart), bench model 9.5
// against 10.9 ms (15 rounds, 200 ms apart); the decode rate was the same. start() queues the
// task; it settles its promise and deletes itself on the event loop.
class DecodeTask {
    public:
        virtual ~DecodeTask() = default;

        Napi::Promise start() {
            Napi::Promise promise = deferred.Promise();
            DecodeThread::post([this] {
                try {
                    execute();
                } catch (const std::exception& e) {
                    fail(e.what());
                } catch (...) {
                    fail("Unknown error on the decode thread");
                }
                // A copy: the task may be deleted on the event loop before Release returns.
                Napi::ThreadSafeFunction channel = events;
                channel.NonBlockingCall([this](Napi::Env env, Napi::Function) { settle(env); });
                channel.Release();
            });
            return promise;
        }

    protected:
        DecodeTask(const Napi::Env& env, const char* name)
            : asyncContext(env, name),
              deferred(Napi::Promise::Deferred::New(env)),
              events(Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo&) {}), name, 0, 1)) {}

        // On the decode thread.
        virtual void execute() = 0;
        // On the event loop, once execute() has returned without a failure.
        virtual Napi::Value result(Napi::Env env) = 0;

        // Records why the task failed (the first reason counts); its promise is rejected with it.
        void fail(const char* message) {
            if (!failure) failure = std::string(message);
        }

        // Calls `callback` on the event loop, after whatever this task sent there before.
        void toEventLoop(std::function<void(Napi::Env)> callback) {
            events.NonBlockingCall([callback = std::move(callback)](Napi::Env env, Napi::Function) { callback(env); });
        }

    private:
        Napi::AsyncContext asyncContext;
        Napi::Promise::Deferred deferred;
        Napi::ThreadSafeFunction events;
        std::optional<std::string> failure;

        void settle(Napi::Env env) {
            {
                Napi::HandleScope handles(env);
                // The promise jobs the settling queues run as this scope closes, as after Node-API
                // async work, not whenever some later callback happens to run them.
                Napi::CallbackScope callbacks(env, asyncContext);
                if (failure) {
                    deferred.Reject(Napi::Error::New(env, *failure).Value());
                } else {
                    deferred.Resolve(result(env));
                }
            }
            delete this;
        }
};

class DecodeAndSampleTask : public DecodeTask {
    public:
        DecodeAndSampleTask(const Napi::Env& env, StepArguments args)
            : DecodeTask(env, "ModelhostDecodeAndSample"), refs(std::move(args)), tokens(refs.args.batchIndexes.size(), -1) {}

    protected:
        StepReferences refs;
        std::vector<int32_t> tokens;

        void execute() override {
            const char* error = decodeBatch(refs.args.ctx);
            if (error == nullptr) error = sampleEach(refs.args.ctx, refs.args.batchIndexes, refs.args.samplers, tokens);
            if (error != nullptr) fail(error);
        }
        Napi::Value result(Napi::Env env) override { return toInt32Array(env, tokens.data(), tokens.size()); }
};

class GenerateTask : public DecodeTask {
    public:
        GenerateTask(const Napi::Env& env, StepArguments args, std::vector<int32_t> sequenceIds, std::vector<int32_t> positions,
                     std::vector<int32_t> endTokens, int32_t maxSteps, Napi::Int32Array control, Napi::Function onSteps)
            : DecodeTask(env, "ModelhostGenerate"),
              refs(std::move(args)),
              sequenceIds(std::move(sequenceIds)),
              positions(std::move(positions)),
              endTokens(std::move(endTokens)),
              maxSteps(maxSteps),
              control(control.Data()),
              controlRef(Napi::Persistent(control)),
              onSteps(Napi::Persistent(onSteps)) {
            std::sort(this->endTokens.begin(), this->endTokens.end());
        }

    protected:
        StepReferences refs;
        std::vector<int32_t> sequenceIds;
        std::vector<int32_t> positions;
        std::vector<int32_t> endTokens;
        int32_t maxSteps;
        // Written by JavaScript on the event loop, read here between steps: [0] non-zero to stop,
        // [1] how long a step may be held, in µs.
        const int32_t* control;
        Napi::Reference<Napi::Int32Array> controlRef;
        Napi::FunctionReference onSteps;
        int32_t steps = 0;
        struct {
            std::mutex mutex;
            std::condition_variable taken;
            std::vector<int32_t> tokens;
            // When the first of the steps held was decoded.
            std::chrono::steady_clock::time_point oldest;
            bool signalled = false;
        } undelivered;

        bool ends(int32_t token) const {
            if (token < 0) return true;
            if (std::binary_search(endTokens.begin(), endTokens.end(), token)) return true;
            return llama_vocab_is_eog(llama_model_get_vocab(refs.args.ctx->model->model), token);
        }

        void execute() override {
            AddonContext* ctx = refs.args.ctx;
            const size_t n = refs.args.batchIndexes.size();
            std::vector<int32_t> batchIndexes = refs.args.batchIndexes;
            std::vector<int32_t> tokens(n, -1);
            const auto started = std::chrono::steady_clock::now();
            auto stepStarted = started;
            // Whatever way the loop ends, the steps still held go to the event loop.
            struct HandOverAtEnd {
                GenerateTask& task;
                ~HandOverAtEnd() { task.signal(); }
            } handOverAtEnd{*this};
            for (int32_t step = 0;; step++) {
                if (step > 0) {
                    if (step > maxSteps || __atomic_load_n(control, __ATOMIC_ACQUIRE) != 0) return;
                    if (std::any_of(tokens.begin(), tokens.end(), [this](int32_t token) { return ends(token); })) return;
                    if (std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count() >= SLICE_US &&
                        DecodeThread::othersWaiting()) {
                        return;
                    }
                    common_batch_clear(ctx->batch);
                    for (size_t i = 0; i < n; i++) {
                        common_batch_add(ctx->batch, tokens[i], positions[i] + step - 1, {sequenceIds[i]}, true);
                        batchIndexes[i] = static_cast<int32_t>(i);
                    }
                }
                const char* error = decodeBatch(ctx);
                if (error == nullptr) error = sampleEach(ctx, batchIndexes, refs.args.samplers, tokens);
                if (error != nullptr) {
                    fail(error);
                    return;
                }
                steps = step + 1;
                const auto now = std::chrono::steady_clock::now();
                const auto stepTook = now - stepStarted;
                stepStarted = now;
                if (!deliver(tokens, step == 0, now, stepTook)) return;
            }
        }
        Napi::Value result(Napi::Env env) override { return Napi::Number::New(env, steps); }

        // On the event loop: every step decoded since the last call, in one callback.
        void onProgress(Napi::Env env) {
            std::vector<int32_t> steps;
            {
                std::lock_guard<std::mutex> lock(undelivered.mutex);
                steps.swap(undelivered.tokens);
                undelivered.signalled = false;
            }
            undelivered.taken.notify_one();
            if (steps.empty()) return;
            Napi::HandleScope scope(env);
            // MakeCallback, not Call: a thread-safe function's call does not run the promise jobs
            // it queues, which then waited for the next callback that does (the task's end, up to
            // SLICE_US later: the first token of a stream came 4 ms late). The callback is written
            // not to throw; should it, the exception is left for Node to report.
            onSteps.MakeCallback(env.Global(), {toInt32Array(env, steps.data(), steps.size())});
        }

        // A step decoded: held, or handed over with the steps held before it. A step is held while
        // the next one would still come within the hold (control[1] µs) of the first held, and
        // until LEAD_STEPS gathered; the first step of a call goes at once (a stream's first
        // token). The event loop is signalled once for all that gather before it takes them, so
        // their HTTP writes leave together. False: the event loop took nothing for MAX_WAIT.
        bool deliver(const std::vector<int32_t>& tokens, bool first,
                     std::chrono::steady_clock::time_point now, std::chrono::steady_clock::duration stepTook) {
            std::unique_lock<std::mutex> lock(undelivered.mutex);
            if (undelivered.tokens.empty()) undelivered.oldest = now;
            undelivered.tokens.insert(undelivered.tokens.end(), tokens.begin(), tokens.end());
            const size_t limit = LEAD_STEPS * tokens.size();
            const bool full = undelivered.tokens.size() + tokens.size() >= limit;
            const auto hold = std::chrono::microseconds(__atomic_load_n(control + 1, __ATOMIC_RELAXED));
            const bool nextTooLate = now - undelivered.oldest + stepTook > hold;
            if (first || full || nextTooLate) {
                lock.unlock();
                signal();
                lock.lock();
            }
            return undelivered.taken.wait_for(lock, MAX_WAIT, [&] { return undelivered.tokens.size() < limit; });
        }

        // Wakes the event loop for the steps held, unless it already was and has not taken them yet.
        void signal() {
            {
                std::lock_guard<std::mutex> lock(undelivered.mutex);
                if (undelivered.signalled || undelivered.tokens.empty()) return;
                undelivered.signalled = true;
            }
            toEventLoop([this](Napi::Env env) { onProgress(env); });
        }
};

std::vector<int32_t> toVector(const Napi::Value& value, const Napi::Env& env, const char* usage) {
    if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) throw Napi::TypeError::New(env, usage);
    Napi::Int32Array array = value.As<Napi::Int32Array>();
    return std::vector<int32_t>(array.Data(), array.Data() + array.ElementLength());
}

}  // namespace

// node-llama-cpp's llama_decode, redirected here by the build's patch of AddonContext.cpp.
int modelhostDecode(llama_context* ctx, llama_batch batch) {
    int result = -1;
    std::exception_ptr error;
    DecodeThread::run([&] {
        try {
            result = llama_decode(ctx, batch);
        } catch (...) {
            error = std::current_exception();
        }
    });
    if (error) std::rethrow_exception(error);
    return result;
}

Napi::Value modelhostDecodeAndSample(const Napi::CallbackInfo& info) {
    StepArguments args = readStepArguments(info, "modelhostDecodeAndSample(context, batchIndexes: Int32Array, samplers: AddonSampler[])");
    return (new DecodeAndSampleTask(info.Env(), std::move(args)))->start();
}

Napi::Value modelhostGenerate(const Napi::CallbackInfo& info) {
    const char* usage =
        "modelhostGenerate(context, batchIndexes: Int32Array, samplers: AddonSampler[], sequenceIds: Int32Array, positions: Int32Array, "
        "endTokens: Int32Array, maxSteps: number, control: Int32Array, onSteps: (tokens: Int32Array) => void)";
    Napi::Env env = info.Env();
    StepArguments args = readStepArguments(info, usage);
    if (info.Length() != 9 || !info[6].IsNumber() || !info[7].IsTypedArray() || !info[8].IsFunction()) throw Napi::TypeError::New(env, usage);
    std::vector<int32_t> sequenceIds = toVector(info[3], env, usage);
    std::vector<int32_t> positions = toVector(info[4], env, usage);
    std::vector<int32_t> endTokens = toVector(info[5], env, usage);
    Napi::Int32Array control = info[7].As<Napi::Int32Array>();
    const size_t n = args.batchIndexes.size();
    if (sequenceIds.size() != n || positions.size() != n || control.ElementLength() < 2) {
        throw Napi::RangeError::New(env, "sequenceIds and positions need one entry per batch index, control two (stop, hold in µs)");
    }
    if (n == 0 || n > static_cast<size_t>(args.ctx->batch_n_tokens)) {
        throw Napi::RangeError::New(env, "The batch cannot hold one token per sequence");
    }
    GenerateTask* task = new GenerateTask(env, std::move(args), std::move(sequenceIds), std::move(positions), std::move(endTokens),
                                          info[6].As<Napi::Number>().Int32Value(), control, info[8].As<Napi::Function>());
    return task->start();
}

Napi::Value modelhostTrimMemory(const Napi::CallbackInfo& info) {
#if defined(__GLIBC__)
    malloc_trim(0);
    return Napi::Boolean::New(info.Env(), true);
#else
    return Napi::Boolean::New(info.Env(), false);
#endif
}

// ---------------------------------------------------------------------------------------------
// Images: llama.cpp's tools/mtmd (a vision model's projector file, `mmproj-*.gguf`), linked into
// the addon by the build's CMakeLists patch (addonPatch.ts).
//
// modelhostMultimodalLoad(model: AddonModel, projectorPath: string, threads: number, marker: string)
//   -> Promise<External>: loads the projector for the model, on the decode thread (mtmd runs a
//   warm-up encode with ggml, whose OpenMP team is the decode thread's). Rejects with mtmd's reason
//   logged and a message here when mtmd returns none (a projector for another model, say).
// modelhostMultimodalTokenize(projector, text: string, images: Uint8Array[])
//   -> Promise<{ chunks: External, parts: Array<Int32Array | { id: string, tokens: number, positions: number }> }>
//   On a libuv pool thread: decodes each image (stb_image, as llama-server does; its id is the
//   SHA-256 of its bytes) and splits the text at each marker into text tokens and image chunks.
// modelhostMultimodalEvaluate(context: AddonContext, projector, chunks, index: number,
//                             sequenceId: number, position: number, batchSize: number) -> Promise<number>
//   On the decode thread: encodes image chunk `index` and decodes its embeddings into the sequence
//   from `position`; resolves to the position after it.
// modelhostMultimodalFree(projector): frees the projector now (before its model goes), on the decode thread.

namespace {

// A loaded projector. Tasks hold it by shared_ptr, so it outlives any task that uses it; `ctx`
// goes (mtmd_free) when JavaScript frees it, under the write lock, which waits for a tokenize in
// flight (a pool thread, under the read lock): an evaluation runs on the decode thread, as the free does.
struct Projector {
    std::shared_mutex lock;
    mtmd_context* ctx = nullptr;
    ~Projector() {
        if (ctx != nullptr) mtmd_free(ctx);
    }
};

struct Chunks {
    mtmd_input_chunks* chunks = mtmd_input_chunks_init();
    ~Chunks() { mtmd_input_chunks_free(chunks); }
};

template <typename T>
Napi::Value toExternal(Napi::Env env, std::shared_ptr<T> value) {
    return Napi::External<std::shared_ptr<T>>::New(env, new std::shared_ptr<T>(std::move(value)),
                                                   [](Napi::Env, std::shared_ptr<T>* held) { delete held; });
}

template <typename T>
std::shared_ptr<T> fromExternal(const Napi::Value& value, Napi::Env env, const char* what) {
    if (!value.IsExternal()) throw Napi::TypeError::New(env, std::string("Not ") + what);
    return *value.As<Napi::External<std::shared_ptr<T>>>().Data();
}

class MultimodalLoadTask : public DecodeTask {
    public:
        MultimodalLoadTask(const Napi::Env& env, AddonModel* model, std::string path, int threads, std::string marker)
            : DecodeTask(env, "ModelhostMultimodalLoad"), model(model), path(std::move(path)), threads(threads), marker(std::move(marker)) {
            model->Ref();
        }
        ~MultimodalLoadTask() override { model->Unref(); }

    protected:
        AddonModel* model;
        std::string path;
        int threads;
        std::string marker;
        std::shared_ptr<Projector> projector = std::make_shared<Projector>();

        void execute() override {
            if (model->disposed || model->model == nullptr) return fail("The model is disposed");
            // mtmd and its helpers log to stderr unless told otherwise: through node-llama-cpp's
            // logger instead, as llama.cpp's own lines go, at the level the server logs at.
            mtmd_helper_log_set(addonLlamaCppLogCallback, nullptr);
            mtmd_context_params params = mtmd_context_params_default();
            params.use_gpu = model->model_params.n_gpu_layers != 0;
            params.print_timings = false;
            params.n_threads = threads;
            params.media_marker = marker.c_str();
            projector->ctx = mtmd_init_from_file(path.c_str(), model->model, params);
            if (projector->ctx == nullptr) fail("llama.cpp could not load the projector for this model (its log says why)");
        }
        Napi::Value result(Napi::Env env) override { return toExternal(env, projector); }
};

class MultimodalTokenizeWorker : public Napi::AsyncWorker {
    public:
        MultimodalTokenizeWorker(const Napi::Env& env, std::shared_ptr<Projector> projector, std::string text,
                                 std::vector<std::vector<unsigned char>> images)
            : Napi::AsyncWorker(env, "ModelhostMultimodalTokenize"),
              deferred(Napi::Promise::Deferred::New(env)),
              projector(std::move(projector)),
              text(std::move(text)),
              images(std::move(images)) {}

        Napi::Promise promise() { return deferred.Promise(); }

    protected:
        Napi::Promise::Deferred deferred;
        std::shared_ptr<Projector> projector;
        std::string text;
        std::vector<std::vector<unsigned char>> images;
        std::shared_ptr<Chunks> chunks = std::make_shared<Chunks>();

        void Execute() override {
            std::shared_lock<std::shared_mutex> reading(projector->lock);
            if (projector->ctx == nullptr) return SetError("The projector is freed");
            std::vector<mtmd_bitmap*> bitmaps;
            struct FreeBitmaps {
                std::vector<mtmd_bitmap*>& bitmaps;
                ~FreeBitmaps() {
                    for (mtmd_bitmap* bitmap : bitmaps) mtmd_bitmap_free(bitmap);
                }
            } freeBitmaps{bitmaps};
            for (size_t i = 0; i < images.size(); i++) {
                mtmd_helper_bitmap_wrapper decoded =
                    mtmd_helper_bitmap_init_from_buf(projector->ctx, images[i].data(), images[i].size(), false, mtmd_helper_init_opt_default());
                if (decoded.bitmap == nullptr) return SetError("image " + std::to_string(i) + " could not be decoded");
                bitmaps.push_back(decoded.bitmap);
            }
            mtmd_input_text input{text.c_str(), text.size(), true, true};
            int32_t r = mtmd_tokenize(projector->ctx, chunks->chunks, &input, bitmaps.data(), bitmaps.size());
            if (r == 1) return SetError("the prompt's image markers and its images differ in number");
            if (r != 0) return SetError("an image could not be prepared for the model");
        }

        void OnOK() override {
            Napi::Env env = Env();
            Napi::Array parts = Napi::Array::New(env);
            const size_t n = mtmd_input_chunks_size(chunks->chunks);
            for (size_t i = 0; i < n; i++) {
                const mtmd_input_chunk* chunk = mtmd_input_chunks_get(chunks->chunks, i);
                if (mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
                    size_t count = 0;
                    const llama_token* tokens = mtmd_input_chunk_get_tokens_text(chunk, &count);
                    parts.Set(static_cast<uint32_t>(i), toInt32Array(env, tokens, count));
                } else {
                    Napi::Object part = Napi::Object::New(env);
                    const char* id = mtmd_input_chunk_get_id(chunk);
                    part.Set("id", Napi::String::New(env, id != nullptr ? id : ""));
                    part.Set("tokens", Napi::Number::New(env, static_cast<double>(mtmd_input_chunk_get_n_tokens(chunk))));
                    part.Set("positions", Napi::Number::New(env, static_cast<double>(mtmd_input_chunk_get_n_pos(chunk))));
                    parts.Set(static_cast<uint32_t>(i), part);
                }
            }
            Napi::Object result = Napi::Object::New(env);
            result.Set("chunks", toExternal(env, chunks));
            result.Set("parts", parts);
            deferred.Resolve(result);
        }
        void OnError(const Napi::Error& error) override { deferred.Reject(error.Value()); }
};

class MultimodalEvaluateTask : public DecodeTask {
    public:
        MultimodalEvaluateTask(const Napi::Env& env, AddonContext* ctx, std::shared_ptr<Projector> projector, std::shared_ptr<Chunks> chunks,
                               size_t index, int32_t sequenceId, int32_t position, int32_t batchSize)
            : DecodeTask(env, "ModelhostMultimodalEvaluate"),
              ctx(ctx),
              projector(std::move(projector)),
              chunks(std::move(chunks)),
              index(index),
              sequenceId(sequenceId),
              position(position),
              batchSize(batchSize) {
            ctx->Ref();
        }
        ~MultimodalEvaluateTask() override { ctx->Unref(); }

    protected:
        AddonContext* ctx;
        std::shared_ptr<Projector> projector;
        std::shared_ptr<Chunks> chunks;
        size_t index;
        int32_t sequenceId;
        llama_pos position;
        int32_t batchSize;

        void execute() override {
            if (ctx->disposed) return fail("The context is disposed");
            if (projector->ctx == nullptr) return fail("The projector is freed");
            const mtmd_input_chunk* chunk = mtmd_input_chunks_get(chunks->chunks, index);
            if (chunk == nullptr || mtmd_input_chunk_get_type(chunk) == MTMD_INPUT_CHUNK_TYPE_TEXT) return fail("Not an image chunk");
            llama_pos next = position;
            // Its own batches, straight to llama_decode: this is the decode thread.
            int32_t r = mtmd_helper_eval_chunk_single(projector->ctx, ctx->ctx, chunk, position, sequenceId, batchSize, false, &next);
            if (r != 0) return fail("The image could not be evaluated");
            position = next;
        }
        Napi::Value result(Napi::Env env) override { return Napi::Number::New(env, position); }
};

class MultimodalFreeTask : public DecodeTask {
    public:
        MultimodalFreeTask(const Napi::Env& env, std::shared_ptr<Projector> projector)
            : DecodeTask(env, "ModelhostMultimodalFree"), projector(std::move(projector)) {}

    protected:
        std::shared_ptr<Projector> projector;

        void execute() override {
            std::unique_lock<std::shared_mutex> writing(projector->lock);
            if (projector->ctx != nullptr) mtmd_free(projector->ctx);
            projector->ctx = nullptr;
        }
        Napi::Value result(Napi::Env env) override { return env.Undefined(); }
};

}  // namespace

Napi::Value modelhostMultimodalLoad(const Napi::CallbackInfo& info) {
    const char* usage = "modelhostMultimodalLoad(model: AddonModel, projectorPath: string, threads: number, marker: string)";
    Napi::Env env = info.Env();
    if (info.Length() != 4 || !info[0].IsObject() || !info[1].IsString() || !info[2].IsNumber() || !info[3].IsString()) {
        throw Napi::TypeError::New(env, usage);
    }
    AddonModel* model = Napi::ObjectWrap<AddonModel>::Unwrap(info[0].As<Napi::Object>());
    return (new MultimodalLoadTask(env, model, info[1].As<Napi::String>().Utf8Value(), info[2].As<Napi::Number>().Int32Value(),
                                   info[3].As<Napi::String>().Utf8Value()))
        ->start();
}

Napi::Value modelhostMultimodalTokenize(const Napi::CallbackInfo& info) {
    const char* usage = "modelhostMultimodalTokenize(projector, text: string, images: Uint8Array[])";
    Napi::Env env = info.Env();
    if (info.Length() != 3 || !info[1].IsString() || !info[2].IsArray()) throw Napi::TypeError::New(env, usage);
    std::shared_ptr<Projector> projector = fromExternal<Projector>(info[0], env, "a projector");
    Napi::Array array = info[2].As<Napi::Array>();
    std::vector<std::vector<unsigned char>> images;
    for (uint32_t i = 0; i < array.Length(); i++) {
        Napi::Value value = array.Get(i);
        if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) throw Napi::TypeError::New(env, usage);
        Napi::Uint8Array bytes = value.As<Napi::Uint8Array>();
        images.emplace_back(bytes.Data(), bytes.Data() + bytes.ElementLength());
    }
    auto* worker = new MultimodalTokenizeWorker(env, std::move(projector), info[1].As<Napi::String>().Utf8Value(), std::move(images));
    Napi::Promise promise = worker->promise();
    worker->Queue();
    return promise;
}

Napi::Value modelhostMultimodalEvaluate(const Napi::CallbackInfo& info) {
    const char* usage =
        "modelhostMultimodalEvaluate(context: AddonContext, projector, chunks, index: number, sequenceId: number, position: number, batchSize: number)";
    Napi::Env env = info.Env();
    if (info.Length() != 7 || !info[0].IsObject() || !info[3].IsNumber() || !info[4].IsNumber() || !info[5].IsNumber() || !info[6].IsNumber()) {
        throw Napi::TypeError::New(env, usage);
    }
    AddonContext* ctx = Napi::ObjectWrap<AddonContext>::Unwrap(info[0].As<Napi::Object>());
    if (ctx->disposed) throw Napi::Error::New(env, "The context is disposed");
    std::shared_ptr<Projector> projector = fromExternal<Projector>(info[1], env, "a projector");
    std::shared_ptr<Chunks> chunks = fromExternal<Chunks>(info[2], env, "chunks");
    const int64_t index = info[3].As<Napi::Number>().Int64Value();
    if (index < 0 || static_cast<size_t>(index) >= mtmd_input_chunks_size(chunks->chunks)) throw Napi::RangeError::New(env, "No such chunk");
    return (new MultimodalEvaluateTask(env, ctx, std::move(projector), std::move(chunks), static_cast<size_t>(index),
                                       info[4].As<Napi::Number>().Int32Value(), info[5].As<Napi::Number>().Int32Value(),
                                       info[6].As<Napi::Number>().Int32Value()))
        ->start();
}

Napi::Value modelhostMultimodalFree(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() != 1) throw Napi::TypeError::New(env, "modelhostMultimodalFree(projector)");
    return (new MultimodalFreeTask(env, fromExternal<Projector>(info[0], env, "a projector")))->start();
}
