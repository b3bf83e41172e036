// modelhost's additions to node-llama-cpp's addon, compiled into it by `modelhost engine build`
// (src/engine/native/addonPatch.ts copies this file into node-llama-cpp's llama/addon folder, whose
// CMakeLists compiles every addon/*.cpp, and registers the functions in addon.cpp).
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
//                   onStep: (tokens: Int32Array) => void) -> Promise<number>
//   The same first step, then keeps going without the event loop: each sampled token is decoded
//   as its sequence's next input (at positions[i], positions[i] + 1, … in sequenceIds[i]) and
//   sampled again, and every step's tokens reach onStep, in order, while the next step decodes.
//   Between two steps the pool thread does not wait for the event loop: on the tiny test model a
//   step is ~35 µs and a round trip through the event loop ~30 µs more. It stops before a step
//   when control[0] is non-zero (JavaScript's way to take the context back: new work, a consumer
//   that stopped or fell behind), after maxSteps more steps, after a token that was not sampled
//   (-1), is an end of generation or is in endTokens, and after SLICE_US, so that the one libuv
//   pool thread also runs the process's other tasks (files, scrypt) in between. Resolves to the
//   number of steps; onStep has seen them all by then.

#include <algorithm>
#include <chrono>
#include <vector>

#include "common/common.h"
#include "AddonContext.h"
#include "AddonModel.h"
#include "AddonSampler.h"

namespace {

// How long one modelhostGenerate task keeps the pool thread at most: ~150 tiny-model steps, or
// one or two on a model where a step takes milliseconds.
constexpr int64_t SLICE_US = 5000;

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

class DecodeAndSampleWorker : public Napi::AsyncWorker {
    public:
        DecodeAndSampleWorker(const Napi::Env& env, StepArguments args)
            : Napi::AsyncWorker(env, "ModelhostDecodeAndSampleWorker"),
              refs(std::move(args)),
              tokens(refs.args.batchIndexes.size(), -1),
              deferred(Napi::Promise::Deferred::New(env)) {}

        Napi::Promise GetPromise() { return deferred.Promise(); }

    protected:
        StepReferences refs;
        std::vector<int32_t> tokens;
        Napi::Promise::Deferred deferred;

        void Execute() override {
            try {
                const char* error = decodeBatch(refs.args.ctx);
                if (error == nullptr) error = sampleEach(refs.args.ctx, refs.args.batchIndexes, refs.args.samplers, tokens);
                if (error != nullptr) SetError(error);
            } catch (const std::exception& e) {
                SetError(e.what());
            } catch (...) {
                SetError("Unknown error when decoding and sampling");
            }
        }
        void OnOK() override { deferred.Resolve(toInt32Array(Env(), tokens.data(), tokens.size())); }
        void OnError(const Napi::Error& err) override { deferred.Reject(err.Value()); }
};

class GenerateWorker : public Napi::AsyncProgressQueueWorker<int32_t> {
    public:
        GenerateWorker(const Napi::Env& env, StepArguments args, std::vector<int32_t> sequenceIds, std::vector<int32_t> positions,
                       std::vector<int32_t> endTokens, int32_t maxSteps, Napi::Int32Array control, Napi::Function onStep)
            : Napi::AsyncProgressQueueWorker<int32_t>(env, "ModelhostGenerateWorker"),
              refs(std::move(args)),
              sequenceIds(std::move(sequenceIds)),
              positions(std::move(positions)),
              endTokens(std::move(endTokens)),
              maxSteps(maxSteps),
              control(control.Data()),
              controlRef(Napi::Persistent(control)),
              onStep(Napi::Persistent(onStep)),
              deferred(Napi::Promise::Deferred::New(env)) {
            std::sort(this->endTokens.begin(), this->endTokens.end());
        }

        Napi::Promise GetPromise() { return deferred.Promise(); }

    protected:
        StepReferences refs;
        std::vector<int32_t> sequenceIds;
        std::vector<int32_t> positions;
        std::vector<int32_t> endTokens;
        int32_t maxSteps;
        // Written by JavaScript on the event loop, read here between steps.
        const int32_t* control;
        Napi::Reference<Napi::Int32Array> controlRef;
        Napi::FunctionReference onStep;
        Napi::Promise::Deferred deferred;
        int32_t steps = 0;

        bool ends(int32_t token) const {
            if (token < 0) return true;
            if (std::binary_search(endTokens.begin(), endTokens.end(), token)) return true;
            return llama_vocab_is_eog(llama_model_get_vocab(refs.args.ctx->model->model), token);
        }

        void Execute(const ExecutionProgress& progress) override {
            try {
                AddonContext* ctx = refs.args.ctx;
                const size_t n = refs.args.batchIndexes.size();
                std::vector<int32_t> batchIndexes = refs.args.batchIndexes;
                std::vector<int32_t> tokens(n, -1);
                const auto started = std::chrono::steady_clock::now();
                for (int32_t step = 0;; step++) {
                    if (step > 0) {
                        if (step > maxSteps || __atomic_load_n(control, __ATOMIC_ACQUIRE) != 0) return;
                        if (std::any_of(tokens.begin(), tokens.end(), [this](int32_t token) { return ends(token); })) return;
                        if (std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count() >= SLICE_US) return;
                        common_batch_clear(ctx->batch);
                        for (size_t i = 0; i < n; i++) {
                            common_batch_add(ctx->batch, tokens[i], positions[i] + step - 1, {sequenceIds[i]}, true);
                            batchIndexes[i] = static_cast<int32_t>(i);
                        }
                    }
                    const char* error = decodeBatch(ctx);
                    if (error == nullptr) error = sampleEach(ctx, batchIndexes, refs.args.samplers, tokens);
                    if (error != nullptr) {
                        SetError(error);
                        return;
                    }
                    steps = step + 1;
                    progress.Send(tokens.data(), n);
                }
            } catch (const std::exception& e) {
                SetError(e.what());
            } catch (...) {
                SetError("Unknown error when generating");
            }
        }
        void OnProgress(const int32_t* data, size_t count) override {
            Napi::HandleScope scope(Env());
            // The callback is written not to throw; should it, the exception is left for Node to report.
            onStep.Call({toInt32Array(Env(), data, count)});
        }
        void OnOK() override { deferred.Resolve(Napi::Number::New(Env(), steps)); }
        void OnError(const Napi::Error& err) override { deferred.Reject(err.Value()); }
};

std::vector<int32_t> toVector(const Napi::Value& value, const Napi::Env& env, const char* usage) {
    if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_int32_array) throw Napi::TypeError::New(env, usage);
    Napi::Int32Array array = value.As<Napi::Int32Array>();
    return std::vector<int32_t>(array.Data(), array.Data() + array.ElementLength());
}

}  // namespace

Napi::Value modelhostDecodeAndSample(const Napi::CallbackInfo& info) {
    StepArguments args = readStepArguments(info, "modelhostDecodeAndSample(context, batchIndexes: Int32Array, samplers: AddonSampler[])");
    DecodeAndSampleWorker* worker = new DecodeAndSampleWorker(info.Env(), std::move(args));
    worker->Queue();
    return worker->GetPromise();
}

Napi::Value modelhostGenerate(const Napi::CallbackInfo& info) {
    const char* usage =
        "modelhostGenerate(context, batchIndexes: Int32Array, samplers: AddonSampler[], sequenceIds: Int32Array, positions: Int32Array, "
        "endTokens: Int32Array, maxSteps: number, control: Int32Array, onStep: (tokens: Int32Array) => void)";
    Napi::Env env = info.Env();
    StepArguments args = readStepArguments(info, usage);
    if (info.Length() != 9 || !info[6].IsNumber() || !info[7].IsTypedArray() || !info[8].IsFunction()) throw Napi::TypeError::New(env, usage);
    std::vector<int32_t> sequenceIds = toVector(info[3], env, usage);
    std::vector<int32_t> positions = toVector(info[4], env, usage);
    std::vector<int32_t> endTokens = toVector(info[5], env, usage);
    Napi::Int32Array control = info[7].As<Napi::Int32Array>();
    const size_t n = args.batchIndexes.size();
    if (sequenceIds.size() != n || positions.size() != n || control.ElementLength() < 1) {
        throw Napi::RangeError::New(env, "sequenceIds and positions need one entry per batch index, control at least one");
    }
    if (n == 0 || n > static_cast<size_t>(args.ctx->batch_n_tokens)) {
        throw Napi::RangeError::New(env, "The batch cannot hold one token per sequence");
    }
    GenerateWorker* worker = new GenerateWorker(env, std::move(args), std::move(sequenceIds), std::move(positions), std::move(endTokens),
                                                info[6].As<Napi::Number>().Int32Value(), control, info[8].As<Napi::Function>());
    worker->Queue();
    return worker->GetPromise();
}
