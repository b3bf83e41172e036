// modelhost's addition to node-llama-cpp's addon, compiled into it by `modelhost engine build`
// (src/engine/native/addonPatch.ts copies this file into node-llama-cpp's llama/addon folder, whose
// CMakeLists compiles every addon/*.cpp, and registers the function in addon.cpp).
//
// Why: a decode step of BatchDecoder is one llama_decode and then one sample per generating
// sequence. Through node-llama-cpp's own methods that is 1 + n tasks on the libuv pool, each a
// hand-over to a pool thread and back to the event loop. This does the decode and every sample in
// one task: one round trip per step (docs/performance.md has the figures). Sampling is exactly
// node-llama-cpp's (AddonContextSampleTokenWorker without metadata): the sampler's chain, its
// grammar, then acceptToken.
//
// modelhostDecodeAndSample(context: AddonContext, batchIndexes: Int32Array, samplers: AddonSampler[])
//   -> Promise<Int32Array>: the token sampled at each batch index, -1 where none could be.

#include <vector>

#include "AddonContext.h"
#include "AddonSampler.h"

class ModelhostDecodeAndSampleWorker : public Napi::AsyncWorker {
    public:
        ModelhostDecodeAndSampleWorker(const Napi::Env& env, AddonContext* ctx, std::vector<int32_t> batchIndexes, std::vector<AddonSampler*> samplers)
            : Napi::AsyncWorker(env, "ModelhostDecodeAndSampleWorker"),
              ctx(ctx),
              batchIndexes(std::move(batchIndexes)),
              samplers(std::move(samplers)),
              tokens(this->batchIndexes.size(), -1),
              deferred(Napi::Promise::Deferred::New(env)) {
            ctx->Ref();
            for (AddonSampler* sampler : this->samplers) {
                sampler->Ref();
            }
        }
        ~ModelhostDecodeAndSampleWorker() {
            ctx->Unref();
            for (AddonSampler* sampler : samplers) {
                sampler->Unref();
            }
        }

        Napi::Promise GetPromise() {
            return deferred.Promise();
        }

    protected:
        AddonContext* ctx;
        std::vector<int32_t> batchIndexes;
        std::vector<AddonSampler*> samplers;
        std::vector<int32_t> tokens;
        Napi::Promise::Deferred deferred;

        void Execute() override {
            try {
                ctx->sharedSamplerData.gotLogit = false;
                ctx->sharedSamplerData.hasLogits = false;

                int r = llama_decode(ctx->ctx, ctx->batch);
                if (r != 0) {
                    SetError(r == 1 ? "could not find a KV slot for the batch (try reducing the size of the batch or increase the context)" : "Eval has failed");
                    return;
                }
                llama_synchronize(ctx->ctx);

                for (size_t i = 0; i < batchIndexes.size(); i++) {
                    AddonSampler* sampler = samplers[i];
                    sampler->rebuildChainIfNeeded();

                    std::unique_lock<std::mutex> samplingLock(ctx->sharedSamplerData.mutex);
                    if (!ctx->sharedSamplerData.gotLogit) {
                        ctx->sharedSamplerData.hasLogits = llama_get_logits(ctx->ctx) != nullptr;
                        ctx->sharedSamplerData.gotLogit = true;
                    }
                    if (!ctx->sharedSamplerData.hasLogits) {
                        SetError("This model does not support token generation");
                        return;
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
            } catch (const std::exception& e) {
                SetError(e.what());
            } catch (...) {
                SetError("Unknown error when decoding and sampling");
            }
        }
        void OnOK() override {
            Napi::Int32Array result = Napi::Int32Array::New(Env(), tokens.size());
            for (size_t i = 0; i < tokens.size(); i++) {
                result[i] = tokens[i];
            }
            deferred.Resolve(result);
        }
        void OnError(const Napi::Error& err) override {
            deferred.Reject(err.Value());
        }
};

Napi::Value modelhostDecodeAndSample(const Napi::CallbackInfo& info) {
    Napi::Env env = info.Env();
    if (info.Length() != 3 || !info[0].IsObject() || !info[1].IsTypedArray() || !info[2].IsArray()) {
        throw Napi::TypeError::New(env, "modelhostDecodeAndSample(context, batchIndexes: Int32Array, samplers: AddonSampler[])");
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

    std::vector<int32_t> batchIndexes(indexArray.ElementLength());
    std::vector<AddonSampler*> samplers(samplerArray.Length());
    for (size_t i = 0; i < batchIndexes.size(); i++) {
        batchIndexes[i] = indexArray[i];
        samplers[i] = Napi::ObjectWrap<AddonSampler>::Unwrap(samplerArray.Get(static_cast<uint32_t>(i)).As<Napi::Object>());
        if (samplers[i] == nullptr || samplers[i]->disposed) {
            throw Napi::Error::New(env, "A sampler is disposed");
        }
    }

    ModelhostDecodeAndSampleWorker* worker = new ModelhostDecodeAndSampleWorker(env, ctx, std::move(batchIndexes), std::move(samplers));
    worker->Queue();
    return worker->GetPromise();
}
